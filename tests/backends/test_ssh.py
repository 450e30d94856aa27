"""The ssh backend against a real sshd of the session's own (generated
keys, a loopback port): pilots start on the node in one ssh call, their
states come back in one call per node and cycle with the logs of those
that ended, kill stops them, an unreachable node says nothing. Plus the
pure parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import tail, wait_until
from tests.pilot_backends import NO_SERVER, QUICK_PILOT, queue_ref, wait_for_states
from wms.backends.base import PilotArgs
from wms.backends.ssh import SshBackend
from wms.backends.ssh_jobs import SshTarget, parse_ref, parse_status, submit_script
from wms.core.errors import InvalidInput

SECRET = "wms_secret_ssh_token"


def options(server, directory: Path) -> dict:
    return {"SSHHost": "127.0.0.1", "SSHUser": server.user, "SSHPort": server.port, "SSHKey": str(server.client_key),
            "SSHKnownHosts": str(server.known_hosts), "SSHDirectory": str(directory)}


def args(opts, *pilot_ids, token=SECRET, argv=QUICK_PILOT):
    return PilotArgs(url=NO_SERVER, token=token, pilot_ids=pilot_ids, argv=argv, options=opts)


# ---------------------------------------------------------------- pure parts
def test_a_reference_holds_everything_status_and_kill_need():
    target = SshTarget(host="node1.example.org", user="pilot", port=2222, key="/k/id", known_hosts="/k/kh",
                       directory="/scratch/wms pilots")
    ref = target.ref("4242", "Site.q-ab12")
    assert ref.startswith("ssh://pilot@node1.example.org:2222/4242/Site.q-ab12?")
    assert parse_ref(ref) == (target, "4242", "Site.q-ab12")
    assert parse_ref("host:12:p") is None and parse_ref("ssh://h:22/x/p") is None


def test_each_token_is_in_the_script_on_stdin_for_its_pilot_alone_not_in_the_command():
    target = SshTarget(host="h", user="u", key="/k")
    script = submit_script(target, b"zip", [("p 1", ["--pilot-id", "p 1"], SECRET),
                                            ("p2", ["--pilot-id", "p2"], "wms_other")])
    lines = script.splitlines()
    # Each token is the here-document of its own pilot's start line: the
    # pilot reads it on stdin (--token-file -), and no shell holds it in its
    # environment (the wrapper waiting for the pilot lives as long as it).
    [first] = [n for n, line in enumerate(lines) if "--pilot-id 'p 1'" in line]
    [second] = [n for n, line in enumerate(lines) if "--pilot-id p2" in line]
    for start, token in ((first, SECRET), (second, "wms_other")):
        assert lines[start].startswith("setsid ") and "--token-file - >" in lines[start]
        assert lines[start].endswith("<<'WMS_PILOT_TOKEN_END' &")
        assert lines[start + 1: start + 3] == [token, "WMS_PILOT_TOKEN_END"]
    assert script.count(SECRET) == 1 and script.count("wms_other") == 1
    assert "WMS_PILOT_TOKEN=" not in script and "export" not in script and "echo started 0 $!" in script
    assert SECRET not in " ".join(target.ssh_argv()) and target.ssh_argv()[-2:] == ["sh", "-s"]
    assert "BatchMode=yes" in target.ssh_argv() and "StrictHostKeyChecking=yes" in target.ssh_argv()


def test_output_of_a_reference_that_is_not_ssh_s_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="not an ssh pilot reference: '12:p'"):
        SshBackend(log_dir=tmp_path).output("12:p", 1 << 20)


def test_status_answers_are_read_by_number():
    states, logs = parse_status("0 running\n1 exit 0\n@@log 1\naGVsbG8K\n@@end\n2 exit 3\n@@log 2\n@@end\n3 gone\n")
    assert states == {0: "Running", 1: "Done", 2: "Failed", 3: "Failed"}
    assert logs == {1: b"hello\n", 2: b""}


# ---------------------------------------------------------------- a real sshd
def test_pilots_start_over_ssh_and_their_end_and_logs_come_back(ssh_server, tmp_path):
    remote = tmp_path / "remote"
    backend = SshBackend(log_dir=tmp_path / "logs")
    opts = options(ssh_server, remote)
    first, second = backend.submit_pilots(queue_ref(), 2, args(opts, "ok", "ok2"))     # one ssh call
    assert parse_ref(first)[2] == "ok" and parse_ref(second)[2] == "ok2"
    states = wait_for_states(backend, [first, second], {"Done", "Failed"})
    assert states == {first: "Done", second: "Done"}      # no server: one empty answer, a clean end
    log = (tmp_path / "logs" / "ok.log").read_text()
    assert "pilot ok starting against http://127.0.0.1:9" in log
    assert backend.output(first, 1 << 20) == log                # `wms pilots --output`: the log brought back
    for path in remote.iterdir():                          # the token is in no file on the node
        assert SECRET.encode() not in path.read_bytes(), path
    assert (remote.stat().st_mode & 0o077) == 0            # the pilots' directory is private

    [no_token] = backend.submit_pilots(queue_ref(), 1, args(opts, "notok", token=""))
    assert wait_for_states(backend, [no_token], {"Done", "Failed"}) == {no_token: "Failed"}
    assert "no token" in (tmp_path / "logs" / "notok.log").read_text()


def test_kill_stops_the_pilot_on_the_node(ssh_server, tmp_path):
    backend = SshBackend(log_dir=tmp_path / "logs")
    waits = (*QUICK_PILOT, "--max-empty", "1000")          # the last one given counts
    [ref] = backend.submit_pilots(queue_ref(), 1, args(options(ssh_server, tmp_path / "remote"), "long", argv=waits))
    assert backend.status([ref]) == {ref: "Running"}
    pid = int(parse_ref(ref)[1])
    # Killed once it handles SIGTERM (it says it starts after installing its
    # handlers): a loaded machine may take a while to start Python.
    remote_log = tmp_path / "remote" / "long.log"
    wait_until(lambda: "starting against" in tail(remote_log), timeout=60, what="the pilot on the node started",
               details=lambda: tail(remote_log))
    assert backend.output(ref, 1 << 20) is None                 # still on the node: it comes back at the end
    backend.kill(ref)
    assert wait_for_states(backend, [ref], {"Done", "Failed"})[ref] in ("Done", "Failed")
    assert not Path(f"/proc/{pid}").exists() or "long" not in Path(f"/proc/{pid}/cmdline").read_text()
    assert "received SIGTERM" in (tmp_path / "logs" / "long.log").read_text()
    assert "received SIGTERM" in backend.output(ref, 1 << 20)


def test_an_unreachable_node_says_nothing(ssh_server, tmp_path):
    opts = {**options(ssh_server, tmp_path), "SSHPort": 1}
    backend = SshBackend(log_dir=tmp_path)
    ref = SshTarget(host="127.0.0.1", user=ssh_server.user, port=1, key=str(ssh_server.client_key)).ref("1", "p")
    assert backend.status([ref]) == {}
    try:
        backend.submit_pilots(queue_ref(), 1, args(opts, "p"))
    except RuntimeError as exc:
        assert "started 0 of 1 pilots" in str(exc)
    else:
        raise AssertionError("a submission to an unreachable node must fail")
