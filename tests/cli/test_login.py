"""`wms login` and `wms logout` (docs/security.md, "Signing in"): the device flow
against a real OpenID provider (tests/oidc.py), as a person at a terminal and
a browser goes through it; the tokens kept 0600 and renewed by every command."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, patience
from tests.oidc import AUDIENCE, PEOPLE, OpenIDProvider, Person, config_with_oidc, running_provider
from tests.servers import WMS, ServerHandle, running_server
from wms.cli.login import SLOW_DOWN_STEP, LoginError, Polling

# Short enough that the test of a code left to run out takes seconds; long enough
# for a person of the tests to type it on a busy machine.
DEVICE_SECONDS = int(patience(8))
_CODE = re.compile(r"open (\S+) and enter the code (\S+)")


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Iterator[OpenIDProvider]:
    # Access tokens of 30 s: less than the minute a command wants left, so each command renews first.
    with running_provider(tmp_path_factory.mktemp("op") / "state", AUDIENCE, PEOPLE, access_seconds=30,
                          device_seconds=DEVICE_SECONDS) as op:
        yield op


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider) -> Iterator[ServerHandle]:
    tmp = tmp_path_factory.mktemp("login-server")
    with running_server(tmp / "server", config_dir=config_with_oidc(tmp / "config-src", provider)) as handle:
        yield handle


def terminal(server: ServerHandle, home: Path) -> dict[str, str]:
    return {**server.env, "HOME": str(home)}


def start_login(server: ServerHandle, home: Path) -> tuple[subprocess.Popen, str, str]:
    """`wms login` started; the URL and code it printed."""
    process = subprocess.Popen([*WMS, "login"], env=terminal(server, home), cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = process.stderr.readline()
    found = _CODE.search(line)
    assert found, f"wms login printed {line!r}"
    return process, found[1], found[2]


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=patience(60))
    return process.returncode, out, err


def test_login_prints_where_to_go_waits_for_the_person_and_keeps_the_tokens(server, provider, tmp_path):
    home = tmp_path / "home"
    process, url, code = start_login(server, home)
    assert url == provider.issuer + "/device/"
    Person(provider, "roland").enter(code)
    status, out, err = finish(process)
    assert status == 0, err
    kept = home / ".config" / "wms" / "login.json"
    assert out == f"signed in with {provider.issuer} (VO lhcb); the tokens are in {kept}\n"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    tokens = json.loads(kept.read_text())
    assert tokens["refresh_token"] and tokens["issuer"] == provider.issuer

    # Every later command sends the access token, renewed first (it has less than a minute left).
    submit = subprocess.run([*WMS, "submit", str(REPO / "examples" / "hello.jdl")], env=terminal(server, home),
                            cwd=REPO, capture_output=True, text=True, timeout=patience(60))
    assert submit.returncode == 0, submit.stderr
    job_id = submit.stdout.split()[0]
    renewed = json.loads(kept.read_text())
    assert renewed["access_token"] != tokens["access_token"]
    status_json = json.loads(subprocess.run([*WMS, "status", job_id, "--json"], env=terminal(server, home), cwd=REPO,
                                            capture_output=True, text=True, timeout=patience(60)).stdout)
    assert status_json[0]["Owner"] == "roland"

    logout = subprocess.run([*WMS, "logout"], env=terminal(server, home), cwd=REPO, capture_output=True, text=True,
                            timeout=patience(60))
    assert (logout.returncode, logout.stdout) == (0, "signed out\n")
    assert not kept.exists()
    after = subprocess.run([*WMS, "jobs"], env=terminal(server, home), cwd=REPO, capture_output=True, text=True,
                           timeout=patience(60))
    assert after.returncode == 1 and "no token: run wms login" in after.stderr


def test_a_denied_sign_in_ends_login_saying_so(server, provider, tmp_path):
    process, _, code = start_login(server, tmp_path / "home")
    Person(provider, "roland").enter(code, action="deny")
    status, out, err = finish(process)
    assert (status, out, err) == (1, "", "wms login: sign-in was denied at the identity provider\n")
    assert not (tmp_path / "home" / ".config" / "wms" / "login.json").exists()


def test_a_code_nobody_enters_ends_login_when_it_expires(server, tmp_path):
    process, _, _ = start_login(server, tmp_path / "home")
    status, out, err = finish(process)
    assert (status, out) == (1, "")
    assert err == "wms login: the code expired before it was entered and accepted: run wms login again\n"


def test_a_sign_in_that_can_no_longer_be_renewed_says_to_log_in_again(server, provider, tmp_path):
    home = tmp_path / "home"
    process, _, code = start_login(server, home)
    Person(provider, "alice").enter(code)
    assert finish(process)[0] == 0
    kept = home / ".config" / "wms" / "login.json"
    tokens = json.loads(kept.read_text())
    kept.write_text(json.dumps({**tokens, "refresh_token": "revoked-or-never-issued"}))
    result = subprocess.run([*WMS, "jobs"], env=terminal(server, home), cwd=REPO, capture_output=True, text=True,
                            timeout=patience(60))
    assert result.returncode == 1
    assert result.stderr.startswith(f"wms jobs: your sign-in could not be renewed at {provider.issuer} (")
    assert result.stderr.endswith("): run wms login again\n")


def test_wms_token_still_goes_before_a_sign_in(server, tmp_path):
    token = server.token("bob", "lhcb_user", "lhcb", "user")
    env = {**terminal(server, tmp_path / "home"), "WMS_TOKEN": token}
    os.makedirs(tmp_path / "home" / ".config" / "wms")
    (tmp_path / "home" / ".config" / "wms" / "login.json").write_text("not json")
    result = subprocess.run([*WMS, "jobs", "--json"], env=env, cwd=REPO, capture_output=True, text=True,
                            timeout=patience(60))
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------- RFC 8628 3.5, as rules
def test_polling_waits_the_interval_and_five_seconds_more_after_each_slow_down():
    polling = Polling(interval=5, deadline=600)
    assert polling.after("authorization_pending") == 5
    assert polling.after("slow_down") == 5 + SLOW_DOWN_STEP
    assert polling.after("authorization_pending") == 10
    assert polling.after("slow_down") == 15


@pytest.mark.parametrize("error, message", [
    ("expired_token", "the code expired before it was entered and accepted: run wms login again"),
    ("access_denied", "sign-in was denied at the identity provider"),
    ("invalid_client", "the identity provider refused the sign-in (invalid_client: no such client)"),
])
def test_polling_stops_with_one_line_on_a_final_answer(error, message):
    with pytest.raises(LoginError) as raised:
        Polling(interval=5, deadline=600).after(error, "no such client" if error == "invalid_client" else "")
    assert str(raised.value) == message


def test_a_client_polling_too_soon_is_told_to_slow_down_and_does(server, provider, monkeypatch, tmp_path):
    """The real provider's slow_down: the first wait cut short, the next ones as told."""
    from wms.cli import login

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    waits: list[float] = []
    said: list[str] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            return                          # an eager first poll: at once
        if len(waits) == 2:
            Person(provider, "roland").enter(_CODE.search(said[0])[2])
        import time
        time.sleep(seconds)

    kept = login.login(server.url, say=said.append, sleep=sleep)
    assert kept["access_token"]
    assert waits[:2] == [1, 1 + SLOW_DOWN_STEP]


def test_a_sign_in_at_one_server_is_not_sent_to_another(server, provider, tmp_path):
    home = tmp_path / "home"
    process, _, code = start_login(server, home)
    Person(provider, "roland").enter(code)
    assert finish(process)[0] == 0
    elsewhere = {**terminal(server, home), "WMS_URL": "http://127.0.0.1:9"}
    result = subprocess.run([*WMS, "jobs"], env=elsewhere, cwd=REPO, capture_output=True, text=True,
                            timeout=patience(60))
    assert result.returncode == 1 and "no token: run wms login" in result.stderr
