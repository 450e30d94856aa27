"""Sign-in, the overview, the jobs, a job's page, submit and the queues, in
Chromium against a real server on SQLite and PostgreSQL, with a real pilot
running the job submitted from the browser."""

from __future__ import annotations

import re
import subprocess
import sys

from playwright.sync_api import expect

from tests.helpers import REPO, patience
from tests.web.conftest import PHONE, WAIT_MS

LOCAL = ("DIRAC.Local.ch", "localhost", "default")
HELLO = """[
  Executable = "/bin/sh";
  Arguments = "-c 'echo hello from the console'";
  JobName = "console-hello";
  CPUTime = 600;
]"""
# Line 3 has no value after '=': the server says where.
BROKEN = """[
  Executable = "/bin/sh";
  Arguments = ;
]"""
# No queue offers this platform: the job waits, and the why table says so.
NOWHERE = '[ Executable = "/bin/true"; JobName = "nowhere"; Platform = "sparc-solaris"; ]'
# Runs until killed: the page is looked at while it runs.
SLEEPER = '[ Executable = "/bin/sleep"; Arguments = "120"; JobName = "sleeper"; CPUTime = 600; ]'
# Requirements make a SubmitPool: the queues offering AppVersion2.
TAGGED = '[ Executable = "/bin/true"; JobName = "tagged"; Requirements = [ SoftwareTag = {"AppVersion2"}; ]; ]'


def submit(server, token: str, text: str) -> int:
    with server.api(token) as api:
        response = api.post("/jobs", json={"jdls": [{"source": "t.jdl", "text": text}]})
        assert response.status_code == 201, response.text
        return response.json()["job_ids"][0]


def run_pilot(server, tokens, tmp_path, pilot_id: str) -> subprocess.Popen:
    """A real pilot on the local queue that ends after a few empty polls."""
    cmd = [sys.executable, "-m", "pilot.main", "--url", server.url, "--site", LOCAL[0], "--ce", LOCAL[1],
           "--queue", LOCAL[2], "--workdir", str(tmp_path / "work"), "--poll", "0.2", "--heartbeat", "1",
           "--max-empty", "10", "--min-time-left", "0", "--grace", "1", "--pilot-id", pilot_id,
           "--platform", "x86_64-el9"]
    log = (tmp_path / f"{pilot_id}.log").open("w")
    env = {**server.env, "WMS_PILOT_TOKEN": tokens[pilot_id]}
    return subprocess.Popen(cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)


def test_sign_in_refuses_a_bad_token_and_keeps_a_good_one_for_the_session(console, console_server):
    tab = console()
    tab.open()
    expect(tab.page.get_by_role("heading", name="Sign in")).to_be_visible()
    tab.shot("01-sign-in")
    tab.page.get_by_label("Bearer token").fill("wms_not_a_token")
    tab.page.get_by_role("button", name="Sign in").click()
    expect(tab.page.get_by_role("alert")).to_have_text("Not signed in: invalid token (unknown to this server)")
    expect(tab.page.get_by_label("Bearer token")).to_be_focused()

    tab.sign_in(console_server.issued["roland"])
    expect(tab.page.locator("#who-text")).to_have_text("roland (user, lhcb_user)")
    stored = tab.page.evaluate("() => [sessionStorage.length, localStorage.length, document.cookie]")
    assert stored == [1, 0, ""]  # the browser session only
    tab.page.reload()  # the same tab: still signed in
    expect(tab.page.get_by_role("heading", level=1, name="Overview")).to_be_visible()
    tab.page.get_by_role("button", name="Sign out").click()
    expect(tab.page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert tab.page.evaluate("() => sessionStorage.length") == 0


def test_a_revoked_token_signs_the_tab_out_with_the_reason(console, console_server):
    token = console_server.token("revoked", "lhcb_user", "lhcb", "user")
    tab = console()
    tab.sign_in(token)
    expect(tab.page.get_by_role("heading", level=1, name="Overview")).to_be_visible()
    [view] = [t for t in console_server.json("admin", "token", "list") if t["User"] == "revoked"]
    console_server.ok("admin", "token", "revoke", view["ID"])
    # The overview's next refresh gets a 401 (a second later at most, revoked by another process).
    expect(tab.page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(tab.page.get_by_role("alert")).to_have_text(re.compile(r"^Signed out: .*revoked"))
    assert tab.page.evaluate("() => sessionStorage.length") == 0


def test_overview_counts_and_refreshes_without_reloading(console, console_server):
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    waiting = tab.page.locator('.count[data-state="Waiting"] dd')
    before = int(waiting.inner_text())
    tab.page.evaluate("() => { window.notReloaded = true; }")
    submit(console_server, console_server.issued["admin"], NOWHERE)
    expect(waiting).to_have_text(str(before + 1), timeout=WAIT_MS)
    assert tab.page.evaluate("() => window.notReloaded") is True
    expect(tab.page.get_by_role("heading", name="Pilots by state")).to_be_visible()

    # The local queue has 4 slots: four jobs handed to pilots fill it, and the overview says so, live.
    admin = console_server.issued["admin"]
    for _ in range(4):
        submit(console_server, admin, HELLO)
    ids = []  # the jobs handed out: these four, or another test's job the local queue can run as well
    with console_server.api(admin) as api:
        for n in range(4):
            answer = api.post("/matcher/request-job", json={
                "site": LOCAL[0], "ce": LOCAL[1], "queue": LOCAL[2], "host": "wn01", "pilot_id": f"overview-{n}",
                "platform": "x86_64-el9", "cpu_time_left": 100000}).json()
            assert answer.get("match"), answer
            ids.append(answer["job"]["JobID"])
    full = tab.page.locator("#full-queues li", has_text="DIRAC.Local.ch/localhost/default")
    expect(full).to_have_text("DIRAC.Local.ch/localhost/default (queue): slots")
    expect(tab.page.locator("#recent-matches")).not_to_have_text("0")
    tab.shot("02-overview")
    console_server.ok("kill", *map(str, ids), token=admin)  # their slots are free again at once
    expect(full).to_have_count(0)

    tab.page.locator('.count[data-state="Killed"] a').click()  # a state leads to its jobs
    expect(tab.page.get_by_role("heading", level=1, name="Jobs")).to_be_visible()
    expect(tab.page.get_by_label("State")).to_have_value("Killed")
    expect(tab.page.locator(f'tr[data-job="{ids[-1]}"]')).to_be_visible()
    shown = {int(t) for t in tab.page.locator("td[data-column=JobID]").all_inner_texts()}
    assert set(ids) <= shown
    assert set(tab.page.locator("td[data-column=Status]").all_inner_texts()) == {"Killed"}


def test_submit_shows_the_error_at_its_line_then_a_pilot_runs_the_job_to_done(console, console_server, tokens,
                                                                              tmp_path):
    tab = console()
    tab.sign_in(console_server.issued["roland"])
    tab.go("submit", "Submit a job")
    box = tab.page.get_by_label("Job description (JDL)")
    box.fill(BROKEN)
    tab.page.get_by_role("button", name="Submit").click()
    error = tab.page.locator(".editor-error")
    expect(error).to_have_text("Line 3, column 13: Arguments: missing value after '='")
    expect(tab.page.locator(".gutter span.error")).to_have_text("3")
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(box).to_be_focused()
    tab.shot("03-submit-error")

    box.fill(HELLO)
    expect(error).to_be_hidden()  # editing clears the mark
    tab.page.get_by_role("button", name="Submit").click()
    heading = tab.page.get_by_role("heading", level=1, name=re.compile(r"^Job \d+$"))
    expect(heading).to_be_visible()
    job_id = int(heading.inner_text().split()[1])
    expect(tab.page.locator("#job-status")).to_have_text("Waiting")
    expect(tab.page.locator("#job-jdl")).to_contain_text('JobName = "console-hello"')

    pilot = run_pilot(console_server, tokens, tmp_path, f"console-{console_server.backend}-1")
    try:
        expect(tab.page.locator("#job-status")).to_have_text("Done", timeout=patience(90) * 1000)
        expect(tab.page.locator("#job-stdout")).to_have_text("hello from the console\n")
        history = tab.page.locator("#job-history td[data-column=Status]")
        expect(history).to_contain_text(["Received", "Waiting", "Matched", "Running", "Done"])
        expect(tab.page.get_by_role("heading", name="Why it waits")).to_be_hidden()  # it waits no more
        expect(tab.page.get_by_role("heading", name="Where it ran")).to_be_visible()
        expect(tab.page.locator("#job-where")).to_have_text(
            "Ran in queue DIRAC.Local.ch/localhost/default (site DIRAC.Local.ch); ended Done: Execution Complete.")
        tab.shot("04-job-done")
    finally:
        pilot.terminate()
        pilot.wait(timeout=patience(30))
    assert console_server.json("status", str(job_id), token=console_server.issued["roland"])[0]["Status"] == "Done"


def test_a_running_jobs_page_says_where_it_runs_not_why_it_waits(console, console_server, tokens, tmp_path):
    roland = console_server.issued["roland"]
    job_id = submit(console_server, roland, SLEEPER)
    tab = console()
    tab.sign_in(roland)
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    expect(tab.page.get_by_role("heading", name="Why it waits")).to_be_visible()
    pilot = run_pilot(console_server, tokens, tmp_path, f"console-{console_server.backend}-2")
    try:
        expect(tab.page.locator("#job-status")).to_have_text("Running", timeout=patience(90) * 1000)
        expect(tab.page.get_by_role("heading", name="Where it runs")).to_be_visible()
        expect(tab.page.locator("#job-where")).to_have_text(
            "Running in queue DIRAC.Local.ch/localhost/default (site DIRAC.Local.ch).")
        expect(tab.page.get_by_role("heading", name="Why it waits")).to_be_hidden()
        tab.shot("04-job-running")
    finally:
        with console_server.api(roland) as api:
            api.post("/jobs/kill", json={"job_ids": [job_id]})
        pilot.terminate()
        pilot.wait(timeout=patience(30))


def test_a_waiting_jobs_why_table_names_the_layer_for_every_queue(console, console_server):
    job_id = submit(console_server, console_server.issued["roland"], NOWHERE)
    tab = console()
    tab.sign_in(console_server.issued["roland"])
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    rows = tab.page.locator("#job-why tbody tr")
    expect(rows.first).to_be_visible()
    cli = console_server.json("why", str(job_id), token=console_server.issued["roland"])
    expect(rows).to_have_count(len(cli["Queues"]))
    shown = [[c.inner_text() for c in row.locator("td").all()] for row in rows.all()]
    assert shown == [[q["Queue"], q["Layer"], q["Code"], q["Reason"]] for q in cli["Queues"]]
    assert any("platform" in q["Reason"].lower() for q in cli["Queues"])
    tab.shot("05-job-why")

    tab.page.get_by_role("button", name="Kill this job").click()
    tab.page.get_by_role("button", name="Cancel").click()  # asked first; nothing happens on Cancel
    expect(tab.page.get_by_role("button", name="Kill this job")).to_be_focused()
    assert console_server.json("status", str(job_id), token=console_server.issued["roland"])[0]["Status"] == "Waiting"
    tab.page.get_by_role("button", name="Kill this job").click()
    tab.page.get_by_role("button", name=f"Kill job {job_id}").click()
    expect(tab.page.locator("#job-status")).to_have_text("Killed")
    expect(tab.page.get_by_role("heading", name="Why it waits")).to_be_hidden()
    expect(tab.page.get_by_role("button", name="Kill this job")).to_have_count(0)


def test_jobs_table_filters_sorts_and_kills_the_selected_jobs(console, console_server):
    roland = console_server.issued["roland"]
    ids = [submit(console_server, roland, NOWHERE.replace("nowhere", f"to-kill-{n}")) for n in range(2)]
    tab = console()
    tab.sign_in(roland)
    tab.go("jobs", "Jobs")
    page = tab.page
    page.get_by_label("State").select_option("Waiting")
    expect(page.locator(f'tr[data-job="{ids[0]}"]')).to_be_visible()
    page.get_by_role("button", name="Job", exact=False).first.click()  # sort by job id, ascending
    expect(page.locator("th[aria-sort=ascending]")).to_have_count(1)
    first_ids = [int(t) for t in page.locator("td[data-column=JobID]").all_inner_texts()]
    assert first_ids == sorted(first_ids)
    tab.shot("06-jobs")

    for job_id in ids:
        page.get_by_label(f"Select job {job_id}").check()
    page.get_by_role("button", name="Kill selected (2)").click()
    page.get_by_role("button", name="Kill 2 jobs").click()
    expect(page.get_by_role("status").filter(has_text="Killed:")).to_have_text(
        f"Killed: {ids[0]}, {ids[1]}.")
    statuses = {row["JobID"]: row["Status"] for row in console_server.json("status", *map(str, ids), token=roland)}
    assert statuses == {ids[0]: "Killed", ids[1]: "Killed"}
    page.get_by_label("State").select_option("Killed")
    expect(page.locator(f'tr[data-job="{ids[1]}"] td[data-column=Status]')).to_have_text("Killed")


def test_queues_page_shows_usage_bars_task_queues_and_pools(console, console_server):
    submit(console_server, console_server.issued["admin"], TAGGED)
    [pool] = console_server.json("jobs", token=console_server.issued["admin"])[-1:]
    pool_id = pool["SubmitPool"]
    assert pool_id
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("queues", "Queues and pools")
    usage = tab.page.get_by_role("region", name="Usage by level")
    expect(usage.get_by_role("meter", name=re.compile(r"^DIRAC\.Local\.ch\/localhost\/default slots: \d+\/\d+\/4$")))\
        .to_be_visible()
    cli = console_server.json("queues", token=console_server.issued["admin"])
    expect(usage.locator("tbody tr")).to_have_count(len(cli))
    expect(tab.page.get_by_role("region", name="Task queues").locator("tbody tr").first).to_be_visible()
    pools = tab.page.get_by_role("region", name="SubmitPools and the queues each may go to")
    row = pools.locator("tr", has_text=pool_id)
    with console_server.api(console_server.issued["admin"]) as api:
        queues = api.get(f"/pools/{pool_id}").json()["Queues"]
    summary = row.locator("details summary")
    expect(summary).to_have_text(f"{len(queues)} {'queue' if len(queues) == 1 else 'queues'}")
    summary.click()  # the list is read when opened
    assert "DIRAC.Local.ch/localhost/default" in queues
    expect(row.locator("details li")).to_have_text(queues)
    tab.shot("07-queues")
    console_server.ok("kill", str(pool["JobID"]), token=console_server.issued["admin"])  # not for others to run


def test_a_plain_user_is_not_offered_what_the_role_may_not_do(console, console_server):
    tab = console()
    tab.sign_in(console_server.issued["roland"])
    nav = tab.page.get_by_role("navigation", name="Pages")
    expect(nav.get_by_role("link")).to_have_text(
        ["Overview", "Jobs", "Submit", "Queues and pools", "Reservations", "Quota sets", "Complexes"])
    expect(tab.page.get_by_role("heading", name="Pilots by state")).to_have_count(0)
    tab.go("pilots", "Jobs")  # an administrator's page: not offered, an old link lands on the jobs
    manager = console()
    manager.sign_in(console_server.issued["admin"])
    expect(manager.page.get_by_role("navigation", name="Pages").get_by_role("link", name="Pilots")).to_be_visible()


def test_a_pilot_token_is_offered_only_what_a_pilot_may_read(console, console_server, tokens):
    tab = console()
    tab.open()
    tab.page.get_by_label("Bearer token").fill(tokens[f"console-reader-{console_server.backend}"])
    tab.page.get_by_role("button", name="Sign in").click()
    nav = tab.page.get_by_role("navigation", name="Pages")
    expect(nav.get_by_role("link")).to_have_text(["Jobs", "Queues and pools", "Complexes"])
    expect(tab.page.get_by_role("heading", level=1, name="Jobs")).to_be_visible()  # no overview for a pilot
    expect(tab.page.get_by_text("0 of 0 jobs shown.")).to_be_visible()  # it holds none
    expect(tab.page.get_by_role("button", name="Kill selected")).to_have_count(0)


def test_pages_are_readable_at_a_phones_width(console, console_server):
    tab = console(PHONE)
    tab.sign_in(console_server.issued["roland"])
    expect(tab.page.get_by_role("heading", level=1, name="Overview")).to_be_visible()
    tab.shot("phone-overview")
    tab.go("jobs", "Jobs")
    width = tab.page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide: it scrolls sideways"
    tab.shot("phone-jobs")


def test_task_queues_and_pools_come_a_page_at_a_time_each_with_its_own_pager(console, console_server):
    """The queues page at one row a page (#/queues?limit=1): the task queues and the pools
    each lead on to their next page from the server, and back."""
    admin = console_server.issued["admin"]
    ids = [submit(console_server, admin, f'[ Executable = "/bin/true"; Requirements = [ Memory = {m}; ]; ]')
           for m in (11, 12)]
    tab = console()
    tab.sign_in(admin)
    tab.go("queues?limit=1", "Queues and pools")
    for noun, region, column in (("task queues", "Task queues", "TaskQueue"),
                                 ("pools", "SubmitPools and the queues each may go to", "SubmitPool")):
        rows = tab.page.get_by_role("region", name=region).locator(f'td[data-column="{column}"]')
        expect(rows).to_have_count(1)
        first = rows.inner_text()
        tab.page.get_by_role("button", name=f"Next page of {noun}").click()
        expect(rows).not_to_have_text(first)
        expect(rows).to_have_count(1)
        tab.page.get_by_role("button", name=f"Previous page of {noun}").click()
        expect(rows).to_have_text(first)
    tab.shot("07-queues-paged")
    console_server.ok("kill", *map(str, ids), token=admin)  # not for others to run


def test_at_a_phones_width_a_jobs_state_shows_and_times_keep_to_one_line(console, console_server):
    job_id = submit(console_server, console_server.issued["roland"], HELLO)
    tab = console(PHONE)
    tab.sign_in(console_server.issued["roland"])
    tab.go("jobs", "Jobs")
    state = tab.page.locator(f'tr[data-job="{job_id}"] td[data-column=Status]')
    expect(state).to_be_visible()
    box = state.bounding_box()
    assert box["x"] + box["width"] <= PHONE["width"], f"the State column ends at {box['x'] + box['width']} px"
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    time_cell = tab.page.get_by_role("region", name="Status history").locator("td[data-column=Time]").first
    expect(time_cell).to_be_visible()
    line = tab.page.evaluate("(cell) => parseFloat(getComputedStyle(cell).lineHeight) || 20", time_cell.element_handle())
    assert time_cell.bounding_box()["height"] < 2 * line + 12, "a time wraps onto several lines"
    tab.shot("phone-job")


def test_a_job_is_held_and_released_from_its_page_and_the_holds_say_who_and_why(console, console_server):
    roland = console_server.issued["roland"]
    job_id = submit(console_server, roland, NOWHERE.replace("nowhere", "to-hold"))
    tab = console()
    tab.sign_in(roland)
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    tab.page.get_by_label("Reason").fill("input not staged")
    tab.page.get_by_role("button", name="Hold this job").click()
    expect(tab.page.locator("#job-status")).to_have_text("Held")
    expect(tab.page.locator("#job-minor")).to_have_text("Held by the user roland: input not staged")
    holds = tab.page.locator("#job-holds tbody tr")
    expect(holds).to_have_count(1)
    assert [c.inner_text() for c in holds.first.locator("td").all()][:3] == ["user", "roland", "input not staged"]
    tab.shot("10-job-held")

    tab.page.get_by_role("button", name="Release this job").click()
    expect(tab.page.locator("#job-status")).to_have_text("Waiting")
    expect(tab.page.get_by_role("button", name="Hold this job")).to_be_visible()
    history = console_server.json("logging-info", str(job_id), token=roland)
    assert [(h["Status"], h["Source"]) for h in history[-2:]] == [("Held", "User roland"), ("Waiting", "User roland")]


def test_the_selected_jobs_are_held_and_released_from_the_list(console, console_server):
    roland = console_server.issued["roland"]
    ids = [submit(console_server, roland, NOWHERE.replace("nowhere", f"to-hold-{n}")) for n in range(2)]
    tab = console()
    tab.sign_in(roland)
    tab.go("jobs", "Jobs")
    page = tab.page
    for job_id in ids:
        page.get_by_label(f"Select job {job_id}").check()
    page.get_by_role("button", name="Hold selected (2)").click()
    expect(page.get_by_role("status").filter(has_text="Held:")).to_have_text(f"Held: {ids[0]}, {ids[1]}.")
    for job_id in ids:
        expect(page.locator(f'tr[data-job="{job_id}"] td[data-column=Status]')).to_have_text("Held")
        page.get_by_label(f"Select job {job_id}").check()
    page.get_by_role("button", name="Release selected (2)").click()
    expect(page.get_by_role("status").filter(has_text="Released:")).to_have_text(f"Released: {ids[0]}, {ids[1]}.")
    statuses = {j: console_server.json("status", str(j), token=roland)[0]["Status"] for j in ids}
    assert statuses == {ids[0]: "Waiting", ids[1]: "Waiting"}


def test_a_killed_job_is_rescheduled_from_its_page(console, console_server):
    roland = console_server.issued["roland"]
    job_id = submit(console_server, roland, NOWHERE.replace("nowhere", "to-reschedule"))
    console_server.ok("kill", str(job_id), token=roland)
    tab = console()
    tab.sign_in(roland)
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    expect(tab.page.locator("#job-status")).to_have_text("Killed")
    tab.page.get_by_label("Reason").fill("input fixed")
    tab.page.get_by_role("button", name="Reschedule this job").click()
    expect(tab.page.locator("#job-status")).to_have_text("Waiting")
    expect(tab.page.locator("#job-minor")).to_have_text("Rescheduled by roland: input fixed")
    expect(tab.page.get_by_role("button", name="Hold this job")).to_be_visible()


def test_a_job_is_deleted_from_its_page_and_leaves_the_list(console, console_server):
    roland = console_server.issued["roland"]
    job_id = submit(console_server, roland, NOWHERE.replace("nowhere", "to-delete"))
    tab = console()
    tab.sign_in(roland)
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    tab.page.get_by_role("button", name="Delete this job").click()
    tab.page.get_by_role("button", name=f"Delete job {job_id}").click()
    expect(tab.page.locator("#job-status")).to_have_text("Deleted")
    expect(tab.page.get_by_role("button", name="Delete this job")).to_have_count(0)
    assert job_id not in [j["JobID"] for j in console_server.json("jobs", token=roland)]
