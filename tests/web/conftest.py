"""The web console in real Chromium: Debian's /usr/bin/chromium driven by
Playwright (its own browser download cannot be fetched, so it is launched
with ``executable_path``), against a real `wms server` on SQLite and on
PostgreSQL; one server per database and one browser for the whole of
tests/web (each start costs seconds on a loaded machine), every test in a
new browser context of its own.

Every test saves a screenshot of each page it went through under
``WMS_TEST_ARTIFACTS`` (default ``var/test-artifacts``), in
``console/<database>/``, so a person can look at what the browser showed.
A missing Chromium or Playwright skips these tests with the reason; under
CI=true it is a failure (`make test-packages` installs Chromium).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import missing_service
from tests.helpers import REPO, patience
from tests.servers import ServerHandle, Tokens, running_server

BIN = Path(sys.executable).parent
CHROMIUM = os.environ.get("WMS_CHROMIUM", "/usr/bin/chromium")
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
USERS = {
    "roland": ("roland", "lhcb_user", "lhcb", "user"),
    "admin": ("admin", "lhcb_prod", "lhcb", "manager"),
    "oper": ("oper", "lhcb_prod", "lhcb", "operator"),
}
#: How long the browser waits for what a page should show (scaled by WMS_TEST_PATIENCE).
WAIT_MS = patience(20) * 1000


def grid_engine(server: ServerHandle, command: str, *args: str, token: str = "admin") -> subprocess.CompletedProcess:
    """``qconf``/``qrsub``/``qrstat``/``qquota`` ARGS against the server, with the token of ``token``."""
    env = {**server.env, "WMS_TOKEN": server.issued[token]}
    return subprocess.run([str(BIN / command), *args], env=env, capture_output=True, text=True, cwd=REPO,
                          timeout=patience(60))


def artefacts() -> Path:
    return Path(os.environ.get("WMS_TEST_ARTIFACTS") or REPO / "var" / "test-artifacts") / "console"


@pytest.fixture(scope="package")
def browser() -> Iterator:
    """One headless Chromium for the module."""
    if shutil.which(CHROMIUM) is None:
        missing_service(f"Chromium not found at {CHROMIUM} (Debian package 'chromium'; `make test-packages`)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing_service("Playwright for Python is not installed (pip install -e '.[test]')")
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        # --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


@pytest.fixture(scope="package", params=["sqlite", "postgresql"])
def console_server(request, tmp_path_factory, database_factory) -> Iterator[ServerHandle]:
    """`wms server` on a new database of each backend, with tokens for roland (user),
    admin (manager) and oper (operator) in ``server.issued``."""
    url = database_factory(request.param)
    with running_server(tmp_path_factory.mktemp(f"console-{request.param}"), tokens=USERS,
                        database_url=url) as handle:
        handle.backend = request.param  # type: ignore[attr-defined]
        yield handle


@pytest.fixture(scope="package")
def tokens(console_server) -> Tokens:
    return Tokens(console_server)


class Console:
    """A browser tab on the console: sign in, go to a page, take its picture."""

    def __init__(self, page, server: ServerHandle, shots: Path) -> None:
        self.page = page
        self.server = server
        self.shots = shots
        self.errors: list[str] = []  # uncaught JavaScript errors: each one fails the test
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, fragment: str = "") -> None:
        self.page.goto(f"{self.server.url}/ui/#/{fragment}")

    def sign_in(self, token: str) -> None:
        self.open()
        self.page.get_by_label("Bearer token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("button", name="Sign out").wait_for(timeout=WAIT_MS)

    def go(self, fragment: str, heading: str) -> None:
        """Follow the address #/fragment and wait for the page's heading."""
        self.page.evaluate("fragment => { location.hash = '#/' + fragment; }", fragment)
        self.page.get_by_role("heading", level=1, name=heading).wait_for(timeout=WAIT_MS)

    def shot(self, name: str) -> Path:
        """A full-page screenshot, console/<database>/<name>.png."""
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def console(browser, console_server) -> Iterator[Callable[..., Console]]:
    """``console(viewport=DESKTOP)``: a new tab (its own sessionStorage) on the server."""
    shots = artefacts() / console_server.backend
    shots.mkdir(parents=True, exist_ok=True)
    contexts = []
    tabs: list[Console] = []

    def make(viewport: dict[str, int] = DESKTOP) -> Console:
        context = browser.new_context(viewport=viewport)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        tab = Console(context.new_page(), console_server, shots)
        tabs.append(tab)
        return tab

    yield make
    for context in contexts:
        context.close()
    errors = [e for tab in tabs for e in tab.errors]
    assert errors == [], f"JavaScript errors in the console: {errors}"
