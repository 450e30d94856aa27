"""The console signs in with the VO's identity provider: the authorization code
flow with PKCE, in real Chromium, against a real OpenID provider (tests/oidc.py)
and a `wms server` that trusts it (docs/security.md, "Authentication")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oidc import PASSWORD, OpenIDProvider, config_with_oidc
from tests.servers import ServerHandle, running_server
from tests.web.conftest import DESKTOP, WAIT_MS, Console, artefacts


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider) -> Iterator[ServerHandle]:
    tmp = tmp_path_factory.mktemp("console-oidc")
    with running_server(tmp / "server", config_dir=config_with_oidc(tmp / "config-src", provider)) as handle:
        # The console's address is known now: registered at the provider as its redirect URI.
        provider.console_redirects = [handle.url + "/ui/"]
        provider.stop()
        provider.start()
        yield handle


@pytest.fixture
def tab(browser, server) -> Iterator[Console]:
    shots = artefacts() / "sign-in"
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(WAIT_MS)
    console = Console(context.new_page(), server, shots)
    yield console
    context.close()
    assert console.errors == [], f"JavaScript errors in the console: {console.errors}"


def sign_in_at_the_provider(tab: Console, provider: OpenIDProvider, user: str) -> None:
    page = tab.page
    tab.open()
    button = page.get_by_role("button", name=f"Sign in with lhcb (127.0.0.1:{provider.port})")
    button.wait_for(timeout=WAIT_MS)
    tab.shot("sign-in-choices")
    button.click()
    page.wait_for_url(f"{provider.url}/accounts/login/**")
    tab.shot("provider-sign-in")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{provider.url}/o/authorize/**")
    tab.shot("provider-consent")


def test_a_person_signs_in_with_the_provider_and_the_console_shows_who(tab, provider, server):
    sign_in_at_the_provider(tab, provider, "oper")
    tab.page.get_by_role("button", name="Authorize").click()
    tab.page.get_by_role("button", name="Sign out").wait_for(timeout=WAIT_MS)
    assert tab.page.locator("#who-text").inner_text() == "oper (operator, lhcb_prod)"
    assert "code=" not in tab.page.url                      # the one-time code is not left in the address
    tab.shot("signed-in-with-provider")
    tab.go("jobs", "Jobs")


def test_a_person_who_refuses_at_the_provider_is_told_and_not_signed_in(tab, provider):
    sign_in_at_the_provider(tab, provider, "roland")
    tab.page.get_by_role("button", name="Cancel").click()
    alert = tab.page.get_by_text("Not signed in: the identity provider refused")
    alert.wait_for(timeout=WAIT_MS)
    tab.shot("refused-at-provider")
    assert tab.page.get_by_label("Bearer token").is_visible()


def test_a_person_in_no_mapped_group_is_told_why(tab, provider):
    sign_in_at_the_provider(tab, provider, "stranger")
    tab.page.get_by_role("button", name="Authorize").click()
    tab.page.get_by_text("Not signed in: user stranger of VO lhcb is in no group this server maps").wait_for(
        timeout=WAIT_MS)


def test_a_code_brought_back_to_another_tab_is_refused(tab, server):
    tab.page.goto(f"{server.url}/ui/?code=stolen&state=guessed")
    tab.page.get_by_text("Not signed in: this sign-in was not started from this tab").wait_for(timeout=WAIT_MS)
    assert "code=" not in tab.page.url


def test_the_console_may_ask_the_provider_and_nothing_else(server, provider):
    import httpx

    policy = httpx.get(server.url + "/ui/", timeout=30).headers["Content-Security-Policy"]
    assert policy.endswith(f"; connect-src 'self' {provider.url}")
