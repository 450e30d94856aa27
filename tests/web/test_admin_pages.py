"""Quota sets, the complex table and the pilots in Chromium against a real
server (SQLite and PostgreSQL): a rule set enabled and edited in place with
the parser's error at its line (the same error qconf gives), the complex
table edited by a manager only, and the pilots the SiteDirector of a real
`wms agents` started, with the jobs they ran."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from playwright.sync_api import expect

from tests.e2e.processes import kill_pilots
from tests.helpers import interrupt, interruptible, log_tails, wait_until
from tests.web.conftest import PHONE, grid_engine

LOCAL_SITE = "DIRAC.Local.ch"
HELLO = '[ Executable = "/bin/sh"; Arguments = "-c \'echo piloted\'"; JobName = "piloted"; CPUTime = 600; ]'


def after_position(message: str) -> str:
    """What an error says after its "where:LINE[:COL]: " or "Line N[, column C]: " prefix."""
    return re.sub(r"^(Line \d+(, column \d+)?|[^:]+:\d+(:\d+)?): ", "", message)


def test_a_rule_set_is_enabled_and_edited_with_the_error_at_its_line(console, console_server, tmp_path):
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("quotas", "Quota sets")
    page = tab.page
    ruleset1 = page.locator('[data-set="ruleset1"]')
    expect(ruleset1.locator(".badge")).to_have_text("disabled")
    page.get_by_role("button", name="Enable ruleset1").click()
    expect(page.locator("#rqs-status")).to_have_text(re.compile(r'^admin@\S+ modified "ruleset1" in resource_quota list$'))
    expect(ruleset1.locator(".badge")).to_have_text("enabled")
    assert re.search(r"(?m)^\s*enabled\s+(TRUE|true)$", grid_engine(console_server, "qconf", "-srqs", "ruleset1").stdout)
    qquota = grid_engine(console_server, "qquota", "-u", "*").stdout.splitlines()[2:]
    expect(page.get_by_role("region", name="Quota usage").locator("tbody tr")).to_have_count(max(1, len(qquota)))
    tab.shot("12-quota-sets")

    page.get_by_role("button", name="Edit ruleset2").click()
    box = page.get_by_label("Text of ruleset2")
    text = box.input_value()
    broken = text.replace("   enabled", "   bogus        1\n   enabled")
    line = broken.splitlines().index("   bogus        1") + 1
    box.fill(broken)
    page.get_by_role("button", name="Save").click()
    error = page.locator(".editor-error")
    expect(error).to_have_text(re.compile(rf"^Line {line}: unknown attribute 'bogus'"))
    expect(page.locator(".gutter span.error")).to_have_text(str(line))
    (tmp_path / "broken.rqs").write_text(broken)
    qconf = grid_engine(console_server, "qconf", "-Mrqs", str(tmp_path / "broken.rqs"), "ruleset2")
    assert qconf.returncode != 0
    assert after_position(error.inner_text()) == after_position(qconf.stderr.strip().splitlines()[-1])
    tab.shot("13-quota-set-error")

    box.fill(text.replace('"at most 20', '"no more than 20'))
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#rqs-status")).to_contain_text('modified "ruleset2"')
    assert "no more than 20" in grid_engine(console_server, "qconf", "-srqs", "ruleset2").stdout


def test_the_complex_table_is_edited_by_managers_only(console, console_server, tmp_path):
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("complexes", "Complexes")
    page = tab.page
    shown = page.locator("#complex-table").inner_text()
    assert shown.strip() == grid_engine(console_server, "qconf", "-sc").stdout.strip()
    tab.shot("14-complexes")
    page.get_by_role("button", name="Edit the complex table").click()
    box = page.get_by_label("Complex table (qconf -Mc)")
    broken = re.sub(r"(?m)^(compiler_lic\s+cl\s+)INT", r"\1NUMBER", box.input_value())
    line = next(n for n, text in enumerate(broken.splitlines(), 1) if text.startswith("compiler_lic"))
    box.fill(broken)
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".gutter span.error")).to_have_text(str(line))
    (tmp_path / "complexes").write_text(broken)
    qconf = grid_engine(console_server, "qconf", "-Mc", str(tmp_path / "complexes"))
    assert qconf.returncode != 0
    assert after_position(page.locator(".editor-error").inner_text()) == \
        after_position(qconf.stderr.strip().splitlines()[-1])
    tab.shot("15-complexes-error")

    for who, may_edit in (("oper", False), ("roland", False)):
        other = console()
        other.sign_in(console_server.issued[who])
        other.go("complexes", "Complexes")
        expect(other.page.locator("#complex-table")).to_contain_text("compiler_lic")
        expect(other.page.get_by_role("button", name="Edit the complex table")).to_have_count(int(may_edit))


def test_a_plain_user_sees_the_quota_sets_but_no_manager_controls(console, console_server):
    tab = console()
    tab.sign_in(console_server.issued["roland"])
    tab.go("quotas", "Quota sets")
    expect(tab.page.locator('[data-set="ruleset2"] pre')).to_contain_text("limit")
    expect(tab.page.get_by_role("button", name=re.compile("^(Edit|Enable|Disable) "))).to_have_count(0)
    tab.shot("16-quota-sets-user")
    operator = console()
    operator.sign_in(console_server.issued["oper"])
    operator.go("quotas", "Quota sets")
    expect(operator.page.get_by_role("button", name="Edit ruleset2")).to_be_visible()


def test_a_rule_sets_long_description_wraps_at_a_phones_width(console, console_server):
    tab = console(PHONE)
    tab.sign_in(console_server.issued["roland"])
    tab.go("quotas", "Quota sets")
    text = tab.page.locator('[data-set="ruleset1"] pre')
    expect(text).to_contain_text("description")
    scroll, client = text.evaluate("(pre) => [pre.scrollWidth, pre.clientWidth]")
    assert scroll <= client, f"the rule set's text is {scroll} px wide in a {client} px box"


@pytest.fixture(scope="module")
def agents(console_server, tmp_path_factory):
    """`wms agents` on the server's database, its SiteDirector every 2 s starting local pilots."""
    where = tmp_path_factory.mktemp("agents")
    config = where / "config"
    subprocess.run(["cp", "-r", str(console_server.config), str(config)], check=True)
    wms_yaml = config / "wms.yaml"
    wms_yaml.write_text(re.sub(r"(?m)^  site_director: \d+", "  site_director: 2", wms_yaml.read_text()))
    # Pilots for the local queue only: one pilot, not one per queue of the grid.
    resources = yaml.safe_load((config / "resources.yaml").read_text())
    resources["Sites"] = {LOCAL_SITE: resources["Sites"][LOCAL_SITE]}
    (config / "resources.yaml").write_text(yaml.safe_dump(resources))
    log = where / "agents.log"
    env = {**console_server.env, "WMS_CONFIG": str(config)}
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "wms.cli.main", "agents"], env=env, cwd=where,
                                   stdout=out, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    yield process, log
    interrupt(process)
    pilots = console_server.json("pilots", token=console_server.issued["admin"])
    kill_pilots([p["BackendRef"] for p in pilots])


def test_pilots_by_queue_and_state_with_their_jobs(console, console_server, agents):
    process, log = agents
    admin = console_server.issued["admin"]
    jdl = console_server.tmp / "piloted.jdl"
    jdl.write_text(HELLO)
    [job_id] = console_server.json("submit", str(jdl), token=admin)["job_ids"]

    def done() -> bool:
        assert process.poll() is None, log_tails([log])
        return console_server.json("status", str(job_id), token=admin)[0]["Status"] == "Done"

    wait_until(done, timeout=120, what=f"job {job_id} Done in a pilot of the SiteDirector",
               details=lambda: log_tails([log]))
    with console_server.api(admin) as api:
        [pilot] = [p for p in api.get("/pilots").json()
                   if job_id in [j["JobID"] for j in api.get("/jobs", params={"pilot": p["PilotID"]}).json()]]
    tab = console()
    tab.sign_in(admin)
    tab.go("pilots", "Pilots")
    queue = tab.page.get_by_role("region", name=f"Pilots of {pilot['Queue']}")
    row = queue.locator("tr", has_text=pilot["PilotID"])
    expect(row).to_be_visible()
    row.get_by_text("Jobs of this pilot").click()  # read when opened
    expect(row.get_by_role("link", name=f"job {job_id}")).to_be_visible()
    tab.shot("17-pilots")
    row.get_by_role("link", name=f"job {job_id}").click()
    expect(tab.page.locator("#job-stdout")).to_have_text("piloted\n")


def test_a_jobs_output_sandbox_files_download_from_its_page(console, console_server, agents, tmp_path):
    process, log = agents
    admin = console_server.issued["admin"]
    jdl = console_server.tmp / "files.jdl"
    jdl.write_text('[ Executable = "/bin/sh"; Arguments = "-c \'echo result 42 > result.txt\'"; '
                   'OutputSandbox = {"result.txt"}; CPUTime = 600; ]')
    [job_id] = console_server.json("submit", str(jdl), token=admin)["job_ids"]
    wait_until(lambda: console_server.json("status", str(job_id), token=admin)[0]["Status"] == "Done", timeout=120,
               what=f"job {job_id} Done with its output sandbox", details=lambda: log_tails([log]))
    tab = console()
    tab.sign_in(admin)
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    files = tab.page.locator("#job-files")
    expect(files.get_by_role("button", name="result.txt")).to_be_visible()
    with tab.page.expect_download() as info:
        files.get_by_role("button", name="result.txt").click()
    saved = tmp_path / "result.txt"
    info.value.save_as(saved)
    assert info.value.suggested_filename == "result.txt"
    assert saved.read_text() == "result 42\n"



def test_a_pilot_without_isolation_is_marked_and_warned_of(console, console_server):
    """A pilot started by hand that declared `--isolation none`: listed from its token,
    its Isolation marked, and a warning above the tables naming it with its note."""
    note = "chosen with --isolation none"
    with console_server.api(console_server.pilot_token("hand-bare")) as pilot:
        answer = pilot.post("/pilots/token/renew", json={"pilot_id": "hand-bare", "slots": 2, "isolation": "none",
                                                         "isolation_note": note})
        assert answer.status_code == 200, answer.text
    with console_server.api(console_server.pilot_token("hand-boxed")) as pilot:
        assert pilot.post("/pilots/token/renew", json={"pilot_id": "hand-boxed", "slots": 1,
                                                       "isolation": "bubblewrap"}).status_code == 200
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("pilots", "Pilots")
    warning = tab.page.locator("#unisolated")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text(f"run payloads without isolation: hand-bare ({note})")
    expect(warning).not_to_contain_text("hand-boxed")
    by_hand = tab.page.get_by_role("region", name="Pilots of Started by hand")
    expect(by_hand.locator("tr", has_text="hand-bare").locator('[data-column="Isolation"]')).to_have_text("none (!)")
    expect(by_hand.locator("tr", has_text="hand-boxed").locator('[data-column="Isolation"]')).to_have_text(
        "bubblewrap")
    tab.shot("18-pilots-without-isolation")


def pilot_ids_shown(tab) -> list[str]:
    return tab.page.locator('#pilots td[data-column="PilotID"]').all_inner_texts()


def test_the_pilots_come_a_page_at_a_time_from_the_server(console, console_server):
    """Three pilots started by hand, the page at two pilots (#/pilots?limit=2): each page the
    server sends holds at most two, Next goes on until the last page, Previous goes back."""
    for n in range(3):
        pilot_id = f"paged-{n}"
        with console_server.api(console_server.pilot_token(pilot_id)) as pilot:
            assert pilot.post("/pilots/token/renew", json={"pilot_id": pilot_id, "slots": 1}).status_code == 200
    tab = console()
    tab.sign_in(console_server.issued["admin"])
    tab.go("pilots?limit=2", "Pilots")
    following = tab.page.get_by_role("button", name="Next page of pilots")
    previous = tab.page.get_by_role("button", name="Previous page of pilots")
    expect(previous).to_be_disabled()
    pages = []
    while True:
        expect(tab.page.locator(".pager-status")).to_contain_text(f"Page {len(pages) + 1}")
        pages.append(pilot_ids_shown(tab))
        if following.is_disabled():
            break
        following.click()
    assert all(len(page) <= 2 for page in pages) and len(pages) >= 2
    seen = sum(pages, [])
    assert {"paged-0", "paged-1", "paged-2"} <= set(seen) and len(seen) == len(set(seen))
    tab.shot("19-pilots-last-page")
    previous.click()
    expect(tab.page.locator(".pager-status")).to_contain_text(f"Page {len(pages) - 1}")
    assert pilot_ids_shown(tab) == pages[-2]
