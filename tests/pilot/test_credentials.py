"""The pilot's token: renewed before it ends; a refusal or the end stops the pilot."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from pilot.client import ApiError, NetworkError
from pilot.credentials import EXIT_CREDENTIAL, Keeper, next_wait, retry_wait
from tests.helpers import REPO
from tests.pilot.conftest import USERS, jdl, pilot_config, status, submit
from tests.pilot.test_main import pilot_cmd, wait_for_status
from tests.servers import Tokens, running_server
from wms.services.tokens import token_hash, token_id


class FakeClient:
    """Answers renewals from a script: a dict (the answer) or an exception, in order; the last repeats."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    def renew_token(self, pilot_id: str, declaration=None):
        self.calls.append(pilot_id)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_renewal_times():
    assert next_wait(3600) == 1800 and next_wait(4) == 5.0
    assert retry_wait(10_000) == 60.0 and retry_wait(20) == 5.0 and retry_wait(1) == 1.0


def test_the_first_renewal_says_whether_the_token_is_refused():
    stop = threading.Event()
    refused = Keeper(FakeClient(ApiError(401, "token abc expired at then")), "p1", stop, lambda r: None)
    assert refused.start() is False and refused.failed == "token abc expired at then"
    forever = Keeper(FakeClient({"ExpiresIn": None}), "p1", stop, lambda r: None)
    assert forever.start() is True and forever.thread is None          # no end: never renewed again
    away = Keeper(FakeClient(NetworkError("refused")), "p1", stop, lambda r: None)
    assert away.start() is True and away.thread is not None            # keeps trying
    stop.set()


def test_renewed_at_half_life_then_a_refusal_stops_the_pilot():
    now = [0.0]
    stop = threading.Event()
    lost: list[str] = []
    client = FakeClient({"ExpiresIn": 10}, {"ExpiresIn": 10}, ApiError(403, "pilot p1 has ended (Aborted)"))
    keeper = Keeper(client, "p1", stop, lost.append, clock=lambda: now[0])
    keeper.stop = _Ticking(now)                                         # each wait advances the clock
    assert keeper.start() is True
    keeper.thread.join(5)
    assert client.calls == ["p1"] * 3 and keeper.renewals == 2
    assert lost == ["pilot p1 has ended (Aborted)"]
    assert keeper.stop.waits == [5.0, 5.0]                              # half of the 10 s left each time


def test_the_end_passing_without_a_renewal_stops_the_pilot():
    now = [0.0]
    lost: list[str] = []
    client = FakeClient({"ExpiresIn": 100}, NetworkError("down"))
    keeper = Keeper(client, "p1", threading.Event(), lost.append, clock=lambda: now[0])
    keeper.stop = _Ticking(now)
    keeper.start()
    keeper.thread.join(5)
    assert lost == ["the token expired before it could be renewed"]
    assert keeper.stop.waits[0] == 50.0 and sum(keeper.stop.waits) == 100.0    # retried until the very end


class _Ticking:
    """An Event whose wait returns at once and moves the fake clock on."""

    def __init__(self, now: list[float]) -> None:
        self.now = now
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now[0] += seconds
        return len(self.waits) > 50

    def is_set(self) -> bool:
        return False


def test_a_pilot_whose_token_is_revoked_stops_at_once_with_exit_3(server, tokens, tmp_path):
    token = server.pilot_token("revoked-pilot")
    server.ok("admin", "token", "revoke", token_id(token_hash(token)))
    cmd = pilot_cmd(server, tmp_path, "--slots", "1")
    cmd[cmd.index("--pilot-id") + 1] = "revoked-pilot"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k not in ("WMS_TOKEN", "WMS_PILOT_TOKEN")}
    started = time.monotonic()
    result = subprocess.run([*cmd, "--token-file", str(token_file)], env=env, cwd=REPO, text=True,
                            capture_output=True, timeout=60)
    assert result.returncode == EXIT_CREDENTIAL, result.stderr
    assert "refuses this pilot's token" in result.stderr and " was revoked at " in result.stderr
    assert time.monotonic() - started < 30
    assert token not in result.stderr and token not in " ".join(cmd)


def test_the_token_file_and_the_environment_keep_the_token_off_the_command_line(server, tokens, tmp_path):
    token = tokens["file-pilot"]
    token_file = tmp_path / "token"
    token_file.write_text(token)
    cmd = pilot_cmd(server, tmp_path, "--slots", "1", "--pools", "no-such-pool", "--max-empty", "1")
    cmd[cmd.index("--pilot-id") + 1] = "file-pilot"
    env = {k: v for k, v in os.environ.items() if k not in ("WMS_TOKEN", "WMS_PILOT_TOKEN")}
    result = subprocess.run([*cmd, "--token-file", str(token_file)], env=env, cwd=REPO, text=True,
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "token renewed" in result.stderr and token not in result.stderr
    result = subprocess.run(cmd, env={**env, "WMS_PILOT_TOKEN": token}, cwd=REPO, text=True, capture_output=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert sys.executable in cmd[0] and token not in " ".join(cmd)


def test_a_token_read_from_standard_input_leaves_nothing_open_there(server, tokens, tmp_path):
    """As the ARC and Slurm backends hand it over: the token in a file that is
    opened as the pilot's standard input and removed before the pilot starts.
    Once read, descriptor 0 is /dev/null: nothing the pilot starts can read
    the removed file again through it."""
    token_file = tmp_path / "pilot.token"
    token_file.write_text(tokens["stdin-pilot"] + "\n")
    cmd = pilot_cmd(server, tmp_path, "--slots", "1", "--pools", "no-such-pool", "--max-empty", "1000",
                    "--poll", "0.5", "--token-file", "-")
    cmd[cmd.index("--pilot-id") + 1] = "stdin-pilot"
    env = {k: v for k, v in os.environ.items() if k not in ("WMS_TOKEN", "WMS_PILOT_TOKEN")}
    with token_file.open() as stdin:
        token_file.unlink()
        pilot = subprocess.Popen(cmd, env=env, cwd=REPO, stdin=stdin, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in pilot.stderr:
            lines.append(line)
            if "token renewed" in line or len(lines) > 200:
                break
        assert any("token renewed" in line for line in lines), "".join(lines)
        assert os.readlink(f"/proc/{pilot.pid}/fd/0") == "/dev/null"
    finally:
        pilot.terminate()
        pilot.wait(timeout=60)


# ---------------------------------------------------------------- a real pilot, short-lived tokens
SHORT_LIFETIME = 10


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory):
    """A server whose pilot tokens live SHORT_LIFETIME seconds."""
    tmp = tmp_path_factory.mktemp("short-lived")
    config = pilot_config(tmp)
    wms_yaml = config / "wms.yaml"
    text = wms_yaml.read_text()
    assert "\npilot_token_lifetime: 14400" in text
    wms_yaml.write_text(text.replace("\npilot_token_lifetime: 14400", f"\npilot_token_lifetime: {SHORT_LIFETIME}"))
    with running_server(tmp, config, tokens=USERS) as handle:
        yield handle, Tokens(handle)


def test_a_running_pilot_renews_its_token_and_outlives_its_first_end(short_lived, tmp_path):
    server, tokens = short_lived
    [job] = submit(server, tokens, tmp_path, jdl(f"sleep {SHORT_LIFETIME + 4}; echo slept"))
    cmd = pilot_cmd(server, tmp_path, "--slots", "1")
    cmd[cmd.index("--pilot-id") + 1] = "renewing-pilot"
    result = subprocess.run(cmd, env={**os.environ, "WMS_PILOT_TOKEN": tokens["renewing-pilot"]}, cwd=REPO,
                            text=True, capture_output=True, timeout=90)
    assert result.returncode == 0, result.stderr
    assert status(server, tokens, job)["Status"] == "Done"            # reported after the first end had passed
    assert result.stderr.count("token renewed") >= 3, result.stderr


def test_a_pilot_whose_token_is_revoked_while_it_runs_leaves_its_job_and_exits_3(short_lived, tmp_path):
    server, tokens = short_lived
    [job] = submit(server, tokens, tmp_path, jdl("sleep 60"))
    token = tokens["doomed-pilot"]
    cmd = pilot_cmd(server, tmp_path, "--slots", "1")
    cmd[cmd.index("--pilot-id") + 1] = "doomed-pilot"
    proc = subprocess.Popen(cmd, env={**os.environ, "WMS_PILOT_TOKEN": token}, cwd=REPO, text=True,
                            stderr=subprocess.PIPE)
    try:
        wait_for_status(server, tokens, [job], "Running", proc)
        server.ok("admin", "token", "revoke", token_id(token_hash(token)))
        assert proc.wait(timeout=30) == EXIT_CREDENTIAL
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert "Pilot credential lost" in err and " was revoked at " in err, err
    # Not reported Failed: the server runs it again once its heartbeats stop.
    assert status(server, tokens, job)["Status"] == "Running"
    server.ok("kill", str(job), token=tokens["roland"])
