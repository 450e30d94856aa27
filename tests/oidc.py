"""A real OpenID provider for the tests (tests/oidc_provider: django-oauth-toolkit),
started as a process on a free port, and a person who signs in there.

``OpenIDProvider(tmp, audience, users)`` makes the provider's RSA key and
its users (each with the VO groups of the WLCG token profile, ``/lhcb``,
``/lhcb/prod``), starts it, and stops it at the end. ``rotate()`` restarts
it with a new active key, the old one still published (a key rotation as
identity providers make them). ``Person(provider, user)`` does in the
provider's pages what a user does in a browser: sign in, type the code
`wms login` printed, accept or deny.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.helpers import ENDS_WITH_TEST, REPO, patience, tail
from tests.servers import free_port

CLI_CLIENT = "wms-cli"
CONSOLE_CLIENT = "wms-console"
OTHER_CLIENT = "other-service"
SHORT_CLIENT = "wms-short"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SCOPE = "openid offline_access wlcg.groups"
PASSWORD = "correct horse battery staple"
# A migrated provider database, copied for each new provider (per test process).
_MIGRATED: Path | None = None
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def new_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class OpenIDProvider:
    def __init__(self, state: Path, audience: str, users: dict[str, list[str]], *,
                 access_seconds: int = 3600, device_seconds: int = 600, interval: int = 1) -> None:
        self.state = state
        self.state.mkdir(parents=True, exist_ok=True)
        self.audience = audience
        self.users = users
        self.env = {"OP_ACCESS_SECONDS": str(access_seconds), "OP_DEVICE_SECONDS": str(device_seconds),
                    "OP_DEVICE_INTERVAL": str(interval), "OP_AUDIENCE": audience}
        self.port = free_port()
        self.keys = [new_key()]
        self.process: subprocess.Popen | None = None
        self.log = state / "provider.log"
        self.console_redirects: list[str] = []    # where the console client may be sent back (its /ui/)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    def start(self) -> None:
        global _MIGRATED
        database = self.state / "provider.sqlite3"
        if _MIGRATED is not None and not database.exists():
            shutil.copyfile(_MIGRATED, database)      # migrating a new database takes seconds
        (self.state / "keys.json").write_text(json.dumps(self.keys))
        seed = {"users": [{"username": name, "password": PASSWORD, "groups": groups}
                          for name, groups in self.users.items()],
                "clients": [{"client_id": CLI_CLIENT, "grant": DEVICE_GRANT},
                            {"client_id": CONSOLE_CLIENT, "grant": "authorization-code",
                             "redirect_uris": " ".join(self.console_redirects)},
                            # tokens for another service: their audience is not this server
                            {"client_id": OTHER_CLIENT, "grant": DEVICE_GRANT, "audience": "https://other.example"},
                            # tokens that live one second
                            {"client_id": SHORT_CLIENT, "grant": DEVICE_GRANT, "access_seconds": 1}]}
        (self.state / "seed.json").write_text(json.dumps(seed))
        env = {**os.environ, **self.env, "OP_STATE": str(self.state), "OP_ISSUER": self.issuer,
               "PYTHONPATH": str(REPO)}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen([*ENDS_WITH_TEST, sys.executable, "-m", "tests.oidc_provider", str(self.port),
                                             str(self.state / "seed.json")], cwd=REPO, env=env,
                                            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + patience(60)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the OpenID provider exited with {self.process.returncode}:\n{tail(self.log)}")
            try:
                if httpx.get(self.issuer + "/.well-known/openid-configuration", timeout=5).status_code == 200:
                    if _MIGRATED is None:
                        _MIGRATED = Path(tempfile.mkdtemp(prefix="wms-op-")) / "migrated.sqlite3"
                        with sqlite3.connect(database) as source, sqlite3.connect(_MIGRATED) as copy:
                            source.backup(copy)
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the OpenID provider did not answer within {patience(60)} s:\n{tail(self.log)}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=patience(20))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def rotate(self) -> None:
        """A new active signing key; the old ones stay published (restarts the provider)."""
        self.stop()
        self.keys = [new_key(), *self.keys]
        self.start()

    def discovery(self) -> dict[str, Any]:
        return httpx.get(self.issuer + "/.well-known/openid-configuration", timeout=patience(10)).json()

    # ------------------------------------------------------------ the device flow, as a program
    def device_code(self, client_id: str = CLI_CLIENT, scope: str = SCOPE) -> dict[str, Any]:
        response = httpx.post(self.issuer + "/device-authorization/", data={"client_id": client_id, "scope": scope},
                              timeout=patience(10))
        response.raise_for_status()
        return response.json()

    def poll(self, device_code: str, client_id: str = CLI_CLIENT) -> httpx.Response:
        return httpx.post(self.issuer + "/token/", data={"grant_type": DEVICE_GRANT, "device_code": device_code,
                                                         "client_id": client_id}, timeout=patience(10))

    def tokens_for(self, user: str, client_id: str = CLI_CLIENT) -> dict[str, Any]:
        """What `wms login` gets when ``user`` signs in and accepts: access and refresh token."""
        code = self.device_code(client_id)
        started = time.monotonic()
        Person(self, user).enter(code["user_code"])
        # The interval must pass before the poll, or the provider says slow_down.
        time.sleep(max(0.0, int(code.get("interval", 5)) - (time.monotonic() - started)) + 0.05)
        response = self.poll(code["device_code"], client_id)
        assert response.status_code == 200, response.text
        return response.json()


class Person:
    """A user at the provider's pages, as in a browser (cookies, forms, CSRF tokens)."""

    def __init__(self, provider: OpenIDProvider, user: str) -> None:
        self.provider = provider
        self.user = user
        self.http = httpx.Client(base_url=provider.url, timeout=patience(10), follow_redirects=True)

    def _form(self, path: str, data: dict[str, str]) -> httpx.Response:
        page = self.http.get(path)
        page.raise_for_status()
        found = _CSRF.search(page.text)
        assert found, f"no form at {path}: {page.text[:500]}"
        return self.http.post(str(page.url), data={"csrfmiddlewaretoken": found[1], **data},
                              headers={"Referer": str(page.url)})

    def sign_in(self) -> None:
        answer = self._form("/accounts/login/", {"username": self.user, "password": PASSWORD})
        assert "/accounts/login/" not in str(answer.url), f"{self.user} could not sign in"

    def enter(self, user_code: str, action: str = "accept") -> None:
        """Sign in, type ``user_code`` at the verification page, then accept or deny."""
        self.sign_in()
        confirm = self._form("/o/device/", {"user_code": user_code})
        assert "device-confirm" in str(confirm.url), confirm.text[:500]
        done = self._form(str(confirm.url), {"action": action})
        done.raise_for_status()


@contextmanager
def running_provider(state: Path, audience: str, users: dict[str, list[str]], **options: Any,
                     ) -> Iterator[OpenIDProvider]:
    provider = OpenIDProvider(state, audience, users, **options)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


AUDIENCE = "https://wms.test"
#: The people of the tests' provider and their groups (the WLCG token profile's wlcg.groups).
PEOPLE = {
    "roland": ["/lhcb"], "alice": ["/lhcb"], "andre": ["/dteam"], "oper": ["/lhcb", "/lhcb/prod"],
    "admin": ["/lhcb", "/lhcb/admin"], "stranger": ["/atlas"],
}


def oidc_section(provider: OpenIDProvider, **checks: Any) -> str:
    """wms.yaml's ``identity_providers:`` for ``provider`` (its groups as the matrix's callers
    have them), and ``identity_provider_checks:`` with ``checks``."""
    extra = "identity_provider_checks:\n" + "".join(f"  {k}: {v}\n" for k, v in checks.items()) if checks else ""
    return f"""
identity_providers:
  - issuer: {provider.issuer}
    vo: lhcb
    audience: {AUDIENCE}
    client_id: {CLI_CLIENT}
    device_endpoint: {provider.issuer}/device-authorization/
    console_client_id: {CONSOLE_CLIENT}
    user_claim: preferred_username
    mappings:
      - {{idp_group: /lhcb/admin, group: lhcb_prod, role: manager}}
      - {{idp_group: /lhcb/prod, group: lhcb_prod, role: operator}}
      - {{idp_group: /lhcb, group: lhcb_user}}
      - {{idp_group: /dteam, group: dteam_user, vo: dteam}}
{extra}"""


def config_with_oidc(dest: Path, provider: OpenIDProvider, source: Path | None = None, **settings: Any) -> Path:
    """A copy of the configuration (``source``, default the repository's) whose wms.yaml trusts ``provider``."""
    from tests.helpers import CONFIG_DIR

    shutil.copytree(source or CONFIG_DIR, dest)
    wms_yaml = dest / "wms.yaml"
    wms_yaml.write_text(wms_yaml.read_text() + oidc_section(provider, **settings))
    return dest


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Iterator[OpenIDProvider]:
    """The tests' identity provider, with PEOPLE, for one module."""
    with running_provider(tmp_path_factory.mktemp("op") / "state", AUDIENCE, PEOPLE) as op:
        yield op
