"""`wms login` and `wms logout`: signing in with the VO's identity provider
by the OAuth 2.0 device authorization grant (RFC 8628), and the access
token every later command sends, refreshed when it runs out.

`wms login` asks the server which identity providers it trusts
(``GET /api/v1/auth/issuers``), asks the chosen one for a device code,
prints where to go and the code to type there, and polls the provider's
token endpoint as RFC 8628 section 3.5 says: every ``interval`` seconds,
five more after each ``slow_down``, until the person accepted (tokens),
denied (``access_denied``) or let the code run out (``expired_token``).
The tokens are kept in ~/.config/wms/login.json, 0600 in a 0700 directory
(the refresh token is a credential). Each command then sends the access
token while it has more than ``REFRESH_MARGIN`` seconds left, else first
trades the refresh token for a new one (and keeps the new refresh token
when the provider rotates it). `wms logout` forgets them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from wms.token_file import token_file, write_token_file

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
#: Seconds of life an access token must have left to be sent as it is.
REFRESH_MARGIN = 60
#: RFC 8628 3.5: the interval when the provider names none, and what each slow_down adds.
DEFAULT_INTERVAL = 5
SLOW_DOWN_STEP = 5
#: Seconds one request to the identity provider may take.
TIMEOUT = 30.0


class LoginError(Exception):
    """Signing in failed; ``str()`` is the one line to print."""


def login_file() -> Path:
    return token_file().with_name("login.json")


# ---------------------------------------------------------------- polling (RFC 8628 3.5), no I/O
@dataclass
class Polling:
    """Where a device flow's polling stands: the interval now and when the code ends."""

    interval: float
    deadline: float

    def after(self, error: str, description: str = "") -> float:
        """The seconds to wait before the next poll, after the token endpoint
        answered ``error``; LoginError when polling must stop."""
        if error == "authorization_pending":
            return self.interval
        if error == "slow_down":
            self.interval += SLOW_DOWN_STEP
            return self.interval
        if error == "expired_token":
            raise LoginError("the code expired before it was entered and accepted: run wms login again")
        if error == "access_denied":
            raise LoginError("sign-in was denied at the identity provider")
        said = f": {description}" if description else ""
        raise LoginError(f"the identity provider refused the sign-in ({error}{said})")


# ---------------------------------------------------------------- the identity provider
def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        raise LoginError(f"{what} answered HTTP {response.status_code} without JSON") from None
    if not isinstance(value, dict):
        raise LoginError(f"{what} did not answer a JSON object")
    return value


def _post(http: httpx.Client, url: str, data: dict[str, str], what: str) -> tuple[int, dict[str, Any]]:
    try:
        response = http.post(url, data=data, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise LoginError(f"cannot reach the identity provider's {what} at {url}: {exc}") from None
    return response.status_code, _json(response, f"the identity provider's {what} ({url})")


def endpoints(http: httpx.Client, issuer: str) -> dict[str, Any]:
    """The provider's discovery document (OpenID Connect Discovery 1.0)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = http.get(url)
    except httpx.HTTPError as exc:
        raise LoginError(f"cannot reach the identity provider at {url}: {exc}") from None
    if response.status_code != 200:
        raise LoginError(f"the identity provider's discovery document {url} answered HTTP {response.status_code}")
    return _json(response, url)


def choose(issuers: list[dict[str, Any]], vo: str | None, issuer: str | None) -> dict[str, Any]:
    """The identity provider to sign in with: the one named, the VO's, or the server's only one."""
    issuers = [i for i in issuers if i.get("ClientID")]
    if not issuers:
        raise LoginError("this server offers no sign-in with an identity provider (wms.yaml identity_providers "
                         "names no client_id): ask for a token (wms admin token create)")
    wanted = [i for i in issuers if (vo is None or i["VO"] == vo) and (issuer is None or i["Issuer"] == issuer)]
    if not wanted:
        offered = ", ".join(f"{i['VO']} ({i['Issuer']})" for i in issuers)
        raise LoginError(f"no identity provider here for {'VO ' + vo if vo else issuer}; this server offers {offered}")
    if len(wanted) > 1:
        offered = ", ".join(f"{i['VO']} ({i['Issuer']})" for i in wanted)
        raise LoginError(f"several identity providers: choose one with --vo or --issuer ({offered})")
    return wanted[0]


def login(server: str, *, vo: str | None = None, issuer: str | None = None,
          say: Callable[[str], None] = print, sleep: Callable[[float], Any] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """The device flow against the provider ``server`` names; the tokens, kept in login_file()."""
    with httpx.Client(timeout=TIMEOUT) as http:
        try:
            answer = http.get(server.rstrip("/") + "/api/v1/auth/issuers")
        except httpx.HTTPError as exc:
            raise LoginError(f"cannot reach the WMS server at {server}: {exc}") from None
        if answer.status_code != 200:
            raise LoginError(f"the WMS server at {server} answered HTTP {answer.status_code} for its identity providers")
        chosen = choose(_json(answer, server).get("Issuers", []), vo, issuer)
        found = endpoints(http, chosen["Issuer"])
        device_url = chosen.get("DeviceEndpoint") or found.get("device_authorization_endpoint")
        token_url = found.get("token_endpoint")
        if not device_url or not token_url:
            raise LoginError(f"the identity provider {chosen['Issuer']} offers no device sign-in "
                             "(no device_authorization_endpoint)")
        status, code = _post(http, device_url, {"client_id": chosen["ClientID"], "scope": chosen["Scope"]},
                             "device authorization endpoint")
        if status != 200 or "device_code" not in code:
            raise LoginError(f"the identity provider refused to start the sign-in: "
                             f"{code.get('error', status)} {code.get('error_description', '')}".strip())
        complete = code.get("verification_uri_complete")
        say(f"To sign in, open {code['verification_uri']} and enter the code {code['user_code']}"
            + (f"\n(or open {complete})" if complete else ""))
        polling = Polling(float(code.get("interval") or DEFAULT_INTERVAL),
                          clock() + float(code.get("expires_in") or 1800))
        wait = polling.interval
        while True:
            if clock() + wait > polling.deadline:
                raise LoginError("the code expired before it was entered and accepted: run wms login again")
            sleep(wait)
            status, tokens = _post(http, token_url, {"grant_type": DEVICE_GRANT, "device_code": code["device_code"],
                                                     "client_id": chosen["ClientID"]}, "token endpoint")
            if status == 200 and "access_token" in tokens:
                break
            wait = polling.after(str(tokens.get("error", f"HTTP {status}")), str(tokens.get("error_description", "")))
    kept = _kept(tokens, {"server": server.rstrip("/"), "issuer": chosen["Issuer"], "vo": chosen["VO"],
                          "client_id": chosen["ClientID"], "token_endpoint": token_url})
    store(kept)
    return kept


def _kept(tokens: dict[str, Any], base: dict[str, Any], old_refresh: str | None = None) -> dict[str, Any]:
    lifetime = tokens.get("expires_in")
    expires = time.time() + float(lifetime) if isinstance(lifetime, (int, float)) else None
    return {**base, "access_token": tokens["access_token"], "expires_at": expires,
            "refresh_token": tokens.get("refresh_token") or old_refresh}


def store(kept: dict[str, Any]) -> Path:
    return write_token_file(json.dumps(kept, indent=1), login_file())


def load() -> dict[str, Any] | None:
    try:
        text = login_file().read_text()
    except FileNotFoundError:
        return None
    try:
        kept = json.loads(text)
    except ValueError:
        raise LoginError(f"{login_file()} is not what wms login writes: run wms login again") from None
    return kept if isinstance(kept, dict) and "access_token" in kept else None


def access_token(server: str | None = None, now: Callable[[], float] = time.time) -> str | None:
    """The access token of the last `wms login` (at ``server``, when named), refreshed
    first when it ends within REFRESH_MARGIN seconds; None when nobody signed in there:
    a token made for one server is never sent to another."""
    kept = load()
    if kept is None or (server is not None and kept.get("server") != server.rstrip("/")):
        return None
    expires = kept.get("expires_at")
    if expires is None or now() < float(expires) - REFRESH_MARGIN:
        return str(kept["access_token"])
    if not kept.get("refresh_token"):
        raise LoginError("your sign-in has ended and cannot be renewed (no refresh token): run wms login again")
    with httpx.Client(timeout=TIMEOUT) as http:
        status, tokens = _post(http, kept["token_endpoint"], {"grant_type": "refresh_token",
                                                              "refresh_token": kept["refresh_token"],
                                                              "client_id": kept["client_id"]}, "token endpoint")
    if status != 200 or "access_token" not in tokens:
        why = tokens.get("error_description") or tokens.get("error") or f"HTTP {status}"
        raise LoginError(f"your sign-in could not be renewed at {kept['issuer']} ({why}): run wms login again")
    base: dict[str, Any] = {k: kept[k] for k in ("server", "issuer", "vo", "client_id", "token_endpoint")
                            if k in kept}
    renewed = _kept(tokens, base, kept["refresh_token"])
    store(renewed)
    return str(renewed["access_token"])


def logout() -> bool:
    """Forget the tokens of `wms login`; whether there were any."""
    path = login_file()
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed


def main_login(server: str, vo: str | None, issuer: str | None) -> int:
    kept = login(server, vo=vo, issuer=issuer, say=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"signed in with {kept['issuer']} (VO {kept['vo']}); the tokens are in {login_file()}")
    if os.environ.get("WMS_TOKEN", "").strip():
        print("note: WMS_TOKEN is set, and commands send it instead", file=sys.stderr)
    return 0
