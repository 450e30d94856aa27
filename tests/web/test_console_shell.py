"""The console's shell in Chromium: usable from the keyboard alone, every
control labelled on every page, nothing the server returns taken as markup,
and the small pure functions of its modules, run in the browser itself."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.conftest import PHONE

# Every page a manager is offered (the job and reservation pages need ids; they are covered elsewhere).
PAGES = [("", "Overview"), ("jobs", "Jobs"), ("submit", "Submit a job"), ("queues", "Queues and pools"),
         ("reservations", "Reservations"), ("reservations/new", "New reservation"), ("quotas", "Quota sets"),
         ("complexes", "Complexes"), ("pilots", "Pilots")]
UNNAMED_CONTROLS = """() => [...document.querySelectorAll("input, select, textarea, button, a[href], summary")]
  .filter((el) => el.getClientRects().length > 0)
  .filter((el) => {
    const labels = el.labels ? [...el.labels].map((l) => l.textContent).join("") : "";
    return !(labels || el.getAttribute("aria-label") || el.textContent || "").trim();
  })
  .map((el) => el.outerHTML.slice(0, 120))"""
HOSTILE_NAME = '<img src=x onerror="window.pwned=1">'


def focus_by_tab(page, name: str, presses: int = 40) -> None:
    """Press Tab until the focused element's accessible text is ``name``."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        focused = page.evaluate("() => (document.activeElement.getAttribute('aria-label') "
                                "|| document.activeElement.textContent || '').trim()")
        if focused == name:
            return
    pytest.fail(f"{name!r} not reached with Tab in {presses} presses")


def test_sign_in_and_kill_a_job_from_the_keyboard_alone(console, console_server):
    roland = console_server.issued["roland"]
    with console_server.api(roland) as api:
        [job_id] = api.post("/jobs", json={"jdls": [{"text": '[ Executable = "/bin/true"; Platform = "none"; ]'}]})\
            .json()["job_ids"]
    tab = console()
    tab.open()
    page = tab.page
    expect(page.get_by_label("Bearer token")).to_be_focused()  # the page starts where the work is
    page.keyboard.type(roland)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1, name="Overview")).to_be_visible()
    focus_by_tab(page, "Jobs")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1, name="Jobs")).to_be_visible()
    focus_by_tab(page, f"Select job {job_id}")
    page.keyboard.press("Space")
    expect(page.get_by_role("button", name="Kill selected (1)")).to_be_visible()
    focus_by_tab(page, "Kill selected (1)")
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Kill 1 job")).to_be_focused()  # the question takes the focus
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Killed:")).to_have_text(f"Killed: {job_id}.")


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_every_control_on_every_page_has_a_name(console, console_server, viewport):
    tab = console(PHONE) if viewport == "phone" else console()
    tab.sign_in(console_server.issued["admin"])
    for fragment, heading in PAGES:
        tab.go(fragment, heading)
        tab.page.wait_for_load_state("networkidle")
        assert tab.page.evaluate(UNNAMED_CONTROLS) == [], f"#/{fragment}"
        if viewport == "phone":
            width = tab.page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"#/{fragment} is {width} px wide at {PHONE['width']} px"


def test_what_the_server_returns_is_shown_as_text_never_as_markup(console, console_server):
    roland = console_server.issued["roland"]
    jdl = f'[ Executable = "/bin/true"; JobName = "{HOSTILE_NAME.replace(chr(34), chr(92) + chr(34))}"; ' \
          'Platform = "none"; ]'
    with console_server.api(roland) as api:
        response = api.post("/jobs", json={"jdls": [{"text": jdl}]})
        assert response.status_code == 201, response.text
        [job_id] = response.json()["job_ids"]
    tab = console()
    tab.sign_in(roland)
    tab.go("jobs", "Jobs")
    cell = tab.page.locator(f'tr[data-job="{job_id}"] td[data-column=JobName]')
    expect(cell).to_have_text(HOSTILE_NAME)
    assert cell.locator("img").count() == 0
    tab.go(f"jobs/{job_id}", f"Job {job_id}")
    expect(tab.page.locator("#job-jdl")).to_contain_text('JobName = "<img src=x onerror=')  # as JDL writes it
    assert tab.page.locator("#job-summary img, #job-jdl img").count() == 0
    assert tab.page.evaluate("() => window.pwned") is None


ERROR_POSITIONS = [
    # the server's detail, the source the console sent, what the editor reads from it
    ("console.jdl:3:13: Arguments: missing value after '='", "console.jdl", {"line": 3, "column": 13}),
    ("rule set:4: unknown attribute 'bogus'", "rule set", {"line": 4, "column": None}),
    ("complex file:12:1: unknown type", "complex file", {"line": 12, "column": 1}),
    ("a job description is required", "console.jdl", None),
    ("other.jdl:3:1: not ours", "console.jdl", None),
]
REQUEST_LISTS = [
    ("", {}),
    ("slots=2", {"slots": "2"}),
    (" slots = 2 , compiler_lic=1", {"slots": "2", "compiler_lic": "1"}),
    ("arch=lx*-amd64", {"arch": "lx*-amd64"}),
    ("slots", "-l 'slots': expected name=value[,name=value...], got 'slots'"),
    ("slots=2,", "-l 'slots=2,': expected name=value[,name=value...], got ''"),
    ("=2", "-l '=2': expected name=value[,name=value...], got '=2'"),
]
USED_OF_TOTAL = [("0/4", [0, 4]), ("3/20", [3, 20]), ("1G/8G", [1e9, 8e9]), ("exclusive", None), ("3 jobs", None)]


def test_the_modules_pure_functions(console, console_server):
    tab = console()
    tab.open()
    run = tab.page.evaluate
    for detail, source, wanted in ERROR_POSITIONS:
        found = run("async ([d, s]) => (await import('./api.js')).errorPosition(d, s)", [detail, source])
        assert (found and {"line": found["line"], "column": found["column"]}) == wanted, detail
    for text, wanted in REQUEST_LISTS:
        got = run("""async (t) => { const m = await import('./pages/reservations.js');
                      try { return m.requestList(t); } catch (e) { return e.message; } }""", text)
        assert got == wanted, text
    for shown, wanted in USED_OF_TOTAL:
        assert run("async (s) => (await import('./pages/queues.js')).usedOfTotal(s)", shown) == wanted, shown
    assert run("async () => (await import('./pages/quotas.js')).isEnabled('{\\n name x\\n enabled FALSE\\n}')") is False
    assert run("async () => (await import('./pages/quotas.js')).isEnabled('{\\n name x\\n}')") is True
