"""A hostile payload on the worker node: what it reaches of its pilot, of the
other pilots and of the other jobs (docs/security.md, "The worker node").

Real pilots, shipped as the zipapp the SiteDirector sends and run by the
node's own Python as an unprivileged Unix user the test creates (real
pilots are unprivileged), against a real server. Two pilots of that user
share one work directory: the first runs alice's job, which keeps a
secret in its directory; the second runs roland's payload, the one a
thief would write: it looks for every pilot's token (the command line
names the token file; the environment of each process), counts the
processes it sees, lists the other jobs' directories and reads their
files, and tries its own job token on the Matcher.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import missing_service
from tests.helpers import patience, wait_until
from tests.pilot.conftest import LOCAL, jdl
from tests.servers import ServerHandle
from wms.backends.bundle import pilot_zipapp

NODE_PYTHON = "/usr/bin/python3"

# The thief's payload. Its first line is the reproduction as a user found it:
# every pilot's --token-file, read.
THIEF = r"""
for p in /proc/[0-9]*; do c=$(tr "\000" " " < $p/cmdline 2>/dev/null); case "$c" in *--token-file*) f=$(echo "$c" | sed -n "s/.*--token-file \([^ ]*\).*/\1/p"); echo "TOKEN=$(cat $f)"; echo "PILOT=$(echo "$c" | sed -n "s/.*--pilot-id \([^ ]*\).*/\1/p")";; esac; done
for p in /proc/[0-9]*; do tr "\000" "\n" < $p/environ 2>/dev/null | grep "^WMS_.*TOKEN=wms_" | sed "s/^/ENV=/"; done
for p in /proc/[0-9]*; do cat $p/maps >/dev/null 2>&1 && echo "MAPS=${p#/proc/}"; done
echo "PROCS=$(ls -d /proc/[0-9]* | wc -l)"
echo "SIBLINGS=$(ls $(dirname $WMS_JOB_DIR) | tr "\n" " ")"
for d in $(dirname $WMS_JOB_DIR)/*; do cat $d/secret 2>/dev/null | sed "s/^/STOLEN=/"; done
echo "HOMES=$(ls /home /root 2>/dev/null | tr "\n" " ")"
echo "JOBTOKEN=${WMS_JOB_TOKEN:+given}"
PYTHONPATH=$WMS_PILOT_PATH python3 -m pilot.job_status "looked around" >/dev/null 2>&1; echo "HELPER=$?"
python3 - <<'PY'
import json, os, urllib.request, urllib.error
body = json.dumps({"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default", "host": "h", "pilot_id": "victim",
                   "slots": 1, "platform": "x86_64-el9"}).encode()
request = urllib.request.Request(os.environ["WMS_URL"] + "/api/v1/matcher/request-job", body, method="POST", headers={
    "Authorization": "Bearer " + os.environ.get("WMS_JOB_TOKEN", "none"), "Content-Type": "application/json"})
try:
    print("CLAIM=%d" % urllib.request.urlopen(request).status)
except urllib.error.HTTPError as exc:
    print("CLAIM=%d" % exc.code)
own = urllib.request.Request("%s/api/v1/jobs/%s/application-status" % (os.environ["WMS_URL"], os.environ["WMS_JOB_ID"]),
                             json.dumps({"application_status": "looked around"}).encode(), method="POST", headers={
    "Authorization": "Bearer " + os.environ.get("WMS_JOB_TOKEN", "none"), "Content-Type": "application/json"})
try:
    print("OWN=%d" % urllib.request.urlopen(own).status)
except urllib.error.HTTPError as exc:
    print("OWN=%d" % exc.code)
PY
"""

VICTIM = "echo alice-secret-1234 > secret; n=0; while [ ! -e release ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done"


def shell_job(script: str) -> str:
    """A JDL running ``script`` (any text: it travels in base64)."""
    return jdl(f"echo {base64.b64encode(script.encode()).decode()} | base64 -d | sh")


@pytest.fixture(scope="module")
def node_user() -> Iterator[pwd.struct_passwd]:
    """An unprivileged Unix user of the test's own, removed with its processes at the end."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        missing_service("the worker-node tests create a Unix user for their pilots: they need root and useradd")
    if not os.path.exists(NODE_PYTHON) or shutil.which("bwrap") is None:
        missing_service(f"the worker-node tests need {NODE_PYTHON} and bubblewrap (`make test-packages`)")
    name = f"wmsnode{os.getpid()}"
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        time.sleep(0.2)
        subprocess.run(["userdel", "--remove", name], capture_output=True)


@pytest.fixture
def node(node_user, tmp_path) -> Iterator[Path]:
    """A directory of the node user's (the pilot zipapp, token files, the shared work directory)."""
    place = Path(tempfile.mkdtemp(prefix="wms-node-", dir="/tmp"))
    (place / "pilot.pyz").write_bytes(pilot_zipapp())
    (place / "work").mkdir()
    for path in (place, place / "pilot.pyz", place / "work"):
        os.chown(path, node_user.pw_uid, node_user.pw_gid)
    os.chmod(place, 0o700)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def start_node_pilot(server: ServerHandle, user: pwd.struct_passwd, node: Path, pilot_id: str, token: str,
                     *options: str, token_in: str = "file", path: str = "/usr/bin:/bin") -> subprocess.Popen[str]:
    """A pilot as the node user, its token in a file of its own (named on its
    command line, as in the reproduction) or in its environment (as the
    SiteDirector's backends pass it)."""
    env = {"PATH": path, "HOME": user.pw_dir, "LANG": "C.UTF-8"}
    argv = [NODE_PYTHON, "-I", str(node / "pilot.pyz"), "--url", server.url, "--site", LOCAL[0], "--ce", LOCAL[1],
            "--queue", LOCAL[2], "--workdir", str(node / "work"), "--poll", "0.2", "--heartbeat", "1",
            "--max-empty", "2", "--min-time-left", "0", "--grace", "1", "--pilot-id", pilot_id, "--slots", "1",
            "--platform", "x86_64-el9", "--state-dir", str(node / "state"), *options]
    if token_in == "file":
        token_file = node / f"{pilot_id}.token"
        token_file.write_text(token)
        os.chown(token_file, user.pw_uid, user.pw_gid)
        os.chmod(token_file, 0o600)
        argv += ["--token-file", str(token_file)]
    else:
        env["WMS_PILOT_TOKEN"] = token
    return subprocess.Popen(argv, env=env, cwd=user.pw_dir, user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                            text=True, stderr=subprocess.PIPE)


def job_of(server: ServerHandle, tokens: dict, job_id: int) -> dict:
    with server.api(tokens["admin"]) as api:
        return api.get(f"/jobs/{job_id}").raise_for_status().json()


def submit_as(server: ServerHandle, tokens: dict, tmp_path: Path, who: str, text: str) -> int:
    path = tmp_path / f"{who}-{time.monotonic_ns()}.jdl"
    path.write_text(text)
    return int(server.ok("submit", str(path), token=tokens[who]).strip())


def thief_output(server: ServerHandle, tokens: dict, job_id: int) -> dict[str, list[str]]:
    """The thief's findings, KEY=value lines grouped by key."""
    with server.api(tokens["admin"]) as api:
        stdout = api.get(f"/jobs/{job_id}/output").raise_for_status().json()["stdout"]
    found: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found.setdefault(key, []).append(value)
    return found


def run_thief_beside_victim(server, tokens, tmp_path, node_user, node, *options: str):
    """alice's job running on one pilot, roland's thief on another; the thief's
    findings, the victim's job directory and both pilots' logs."""
    victim_token, thief_token = tokens["node-victim"], tokens["node-thief"]
    victim = submit_as(server, tokens, tmp_path, "alice", shell_job(VICTIM))
    victim_pilot = start_node_pilot(server, node_user, node, "node-victim", victim_token, *options, token_in="env")
    thief_pilot = None
    try:
        wait_until(lambda: (node / "work" / str(victim) / "secret").exists(), 90, "alice's job to start",
                   details=lambda: job_of(server, tokens, victim)["MinorStatus"])
        thief = submit_as(server, tokens, tmp_path, "roland", shell_job(THIEF))
        thief_pilot = start_node_pilot(server, node_user, node, "node-thief", thief_token, *options)
        wait_until(lambda: job_of(server, tokens, thief)["Status"] in ("Done", "Failed"), 120,
                   "the thief's job to end", details=lambda: json.dumps(job_of(server, tokens, thief)))
        (node / "work" / str(victim) / "release").touch()
        _, thief_log = thief_pilot.communicate(timeout=patience(120))
        _, victim_log = victim_pilot.communicate(timeout=patience(120))
    finally:
        for proc in (victim_pilot, thief_pilot):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert job_of(server, tokens, victim)["Status"] == "Done", victim_log
    return thief_output(server, tokens, thief), (victim_token, thief_token), node / "work" / str(victim), \
        thief_log + victim_log, {str(victim_pilot.pid), str(thief_pilot.pid)}


def test_a_sandboxed_payload_finds_no_token_no_other_process_and_no_other_job(server, tokens, tmp_path,
                                                                               node_user, node):
    found, pilot_tokens, _, logs, _ = run_thief_beside_victim(server, tokens, tmp_path, node_user, node)
    assert "payloads run isolated: bubblewrap" in logs
    # No pilot in sight, so no token file named and no environment read.
    assert "TOKEN" not in found and "ENV" not in found, found
    for token in pilot_tokens:
        assert token not in json.dumps(found)
    # Its own processes only: bwrap's init, the shell, the pipe's commands.
    assert int(found["PROCS"][0]) <= 6, found
    # Of the shared work directory, its own job's only; alice's secret unread;
    # no home directory at all.
    assert found["SIBLINGS"][0].split() == [found["SIBLINGS"][0].split()[0]]
    assert "STOLEN" not in found and found["HOMES"] == [""], found
    # Its job token claims nothing at the Matcher; it sets its own job's
    # application status, which is what it is for.
    assert found["JOBTOKEN"] == ["given"] and found["CLAIM"] == ["403"] and found["OWN"] == ["200"], found
    assert found["HELPER"] == ["0"], found            # the pilot's helper, from the zipapp shown read-only


def test_an_unisolated_payload_still_finds_no_pilot_token(server, tokens, tmp_path, node_user, node):
    """``--isolation none``, the site's explicit choice: the payload sees the
    pilots' processes and the other jobs' files (what docs/security.md says it
    can still do), but not a token: the token file is gone once read, and a
    non-dumpable pilot's environment and memory are closed to its own user."""
    found, pilot_tokens, victim_dir, logs, pilots = run_thief_beside_victim(server, tokens, tmp_path, node_user,
                                                                            node, "--isolation", "none")
    assert "payloads run WITHOUT isolation" in logs and "removed the token file" in logs
    assert "node-thief" in found.get("PILOT", []), found             # it sees its pilot's command line ...
    assert set(found["TOKEN"]) == {""}, found                        # ... but no token file is left to read
    assert "ENV" not in found, found
    # Other processes' memory maps are open to it, the pilots' are not.
    assert found.get("MAPS") and not pilots & set(found["MAPS"]), found
    for token in pilot_tokens:
        assert token not in json.dumps(found)
    assert int(found["PROCS"][0]) > 6                                # the node's processes
    assert found.get("STOLEN") == ["alice-secret-1234"]              # the limit of running unisolated
    assert (victim_dir / "secret").exists()


def test_a_node_without_a_sandbox_runs_only_the_pilot_owners_jobs(server, tokens, tmp_path, node_user, node):
    """No bwrap on the node (its PATH holds none): the pilot says so, declares
    itself unisolated, and by default (--if-no-isolation owner) takes only the
    jobs of its own token's user: roland's own pilot runs roland's job, a
    VO's pilot runs nobody's; with --if-no-isolation run it runs anyone's."""
    no_bwrap = str(node / "bin")
    Path(no_bwrap).mkdir()
    job = submit_as(server, tokens, tmp_path, "roland", jdl("echo ran unisolated"))
    vo_pilot = start_node_pilot(server, node_user, node, "node-vo", tokens["node-vo"], path=no_bwrap)
    _, vo_log = vo_pilot.communicate(timeout=patience(120))
    assert "isolation bubblewrap does not work on this node: bwrap is not installed" in vo_log
    assert "taking only this pilot's own user's jobs" in vo_log
    assert ("no waiting job for the pools this queue serves of user pilot; jobs of user roland wait there "
            "(a pilot that cannot isolate its payloads takes its own user's jobs only)") in vo_log
    assert job_of(server, tokens, job)["Status"] == "Waiting"
    own_token = server.token("roland", "lhcb_user", "lhcb", "pilot")
    own_pilot = start_node_pilot(server, node_user, node, "node-roland", own_token, path=no_bwrap)
    _, own_log = own_pilot.communicate(timeout=patience(120))
    assert job_of(server, tokens, job)["Status"] == "Done", own_log
    assert f"job {job} runs WITHOUT isolation" in own_log
    other = submit_as(server, tokens, tmp_path, "alice", jdl("echo ran unisolated"))
    anyone = start_node_pilot(server, node_user, node, "node-anyone", tokens["node-anyone"],
                              "--if-no-isolation", "run", path=no_bwrap)
    _, any_log = anyone.communicate(timeout=patience(120))
    assert job_of(server, tokens, other)["Status"] == "Done", any_log
    assert "running every job WITHOUT isolation (--if-no-isolation run)" in any_log
