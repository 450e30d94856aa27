"""The slurm backend against a real one-node Slurm (the session's own):
pilots go as batch jobs carrying the pilot, their Slurm states are read
as pilot states in one squeue call, their end is read from the exit file
once Slurm forgets them, and kill is scancel. Plus the pure parts."""

from __future__ import annotations

import io
import subprocess
import zipfile

import pytest

from tests.pilot_backends import NO_SERVER, QUICK_PILOT, queue_ref, wait_for_states
from wms.backends.base import PilotArgs
from wms.backends.bundle import pilot_zipapp
from wms.backends.slurm import SlurmBackend
from wms.backends.slurm_jobs import SLURM_STATES, SlurmRef, batch_script, parse_squeue, sbatch_argv
from wms.core.errors import InvalidInput

SECRET = "wms_secret_token_value"


def args(*pilot_ids, token=SECRET, options=None):
    return PilotArgs(url=NO_SERVER, token=token, pilot_ids=pilot_ids, argv=QUICK_PILOT, options=options or {})


# ---------------------------------------------------------------- pure parts
def test_the_pilot_zipapp_holds_the_pilot_package_and_a_main():
    names = zipfile.ZipFile(io.BytesIO(pilot_zipapp())).namelist()
    assert "__main__.py" in names and "pilot/main.py" in names and "pilot/runner.py" in names


def test_the_script_carries_the_pilot_but_no_token(tmp_path):
    script = batch_script(b"zipapp bytes", ["--url", "http://x", "--pilot-id", "p 1"], tmp_path / "p.exit")
    assert script.startswith("#!/bin/sh\n") and "emlwYXBwIGJ5dGVz" in script      # base64 of the bytes
    assert "--pilot-id 'p 1'" in script and "WMS_TOKEN" not in script
    # The token comes in the environment, which the script leaves at once
    # (starting itself again without it); the pilot reads it on a pipe.
    assert 'exec env -u WMS_PILOT_TOKEN /bin/sh "$0" "$@"' in script and "--token-file - <&3 3<&-" in script
    assert f"mv {tmp_path}/p.exit.tmp {tmp_path}/p.exit" in script


def test_sbatch_exports_the_token_alone_and_the_queue_options_come_last(tmp_path):
    argv = sbatch_argv("p1", tmp_path, "short", ["--time=10"])
    assert "--export=WMS_PILOT_TOKEN" in argv and f"--output={tmp_path}/p1.log" in argv
    assert argv[-2:] == ["--partition=short", "--time=10"]


def test_refs_and_states():
    assert str(SlurmRef("12", "p", "/etc/slurm/a.conf")) == "12:p:/etc/slurm/a.conf"
    assert SlurmRef.parse("12:p:/x:y.conf") == SlurmRef("12", "p", "/x:y.conf")
    assert SlurmRef.parse("12:p") == SlurmRef("12", "p", "") and SlurmRef.parse("host:1:p") is None
    assert parse_squeue("7 PENDING\n8 RUNNING\n\n") == {"7": "PENDING", "8": "RUNNING"}
    assert [SLURM_STATES[s] for s in ("PENDING", "RUNNING", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL",
                                      "OUT_OF_MEMORY", "CANCELLED")] == [
        "Submitted", "Running", "Done", "Failed", "Failed", "Failed", "Failed", "Aborted"]


# ---------------------------------------------------------------- a real Slurm
def test_pilots_run_as_batch_jobs_and_end_done_or_failed(slurm_cluster, tmp_path):
    backend = SlurmBackend(log_dir=tmp_path / "pilots", env=slurm_cluster.env)
    [good] = backend.submit_pilots(queue_ref(), 1, args("ok"))
    [bad] = backend.submit_pilots(queue_ref(), 1, args("nok", token=""))       # no token: the pilot exits 2
    assert SlurmRef.parse(good).pilot_id == "ok" and SlurmRef.parse(bad).pilot_id == "nok"
    job_id = SlurmRef.parse(good).job_id
    script = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"], env=slurm_cluster.env,
                            capture_output=True, text=True).stdout
    assert "pilot.pyz" in script and SECRET not in script            # the token is not in the job's script

    assert wait_for_states(backend, [good, bad], {"Done", "Failed"}) == {good: "Done", bad: "Failed"}
    log = (tmp_path / "pilots" / "ok.log").read_text()
    assert "pilot ok starting against http://127.0.0.1:9" in log and SECRET not in log
    assert "no token" in (tmp_path / "pilots" / "nok.log").read_text()
    assert (tmp_path / "pilots" / "ok.exit").read_text().strip() == "0"
    # What `wms pilots --output` shows: the log Slurm wrote, its end when long.
    assert backend.output(good, 1 << 20) == log and "no token" in backend.output(bad, 1 << 20)
    assert backend.output(good, 10) == f"(the last 10 bytes of {len(log.encode())})\n{log[-10:]}"


def test_a_pilot_slurm_forgot_is_judged_by_its_exit_file_or_counted_vanished(slurm_cluster, tmp_path):
    backend = SlurmBackend(log_dir=tmp_path, env=slurm_cluster.env)
    (tmp_path / "gone-ok.exit").write_text("0\n")
    (tmp_path / "gone-bad.exit").write_text("1\n")
    refs = ["999991:gone-ok", "999992:gone-bad", "999993:vanished"]     # ids this Slurm never had
    assert backend.status(refs) == dict(zip(refs, ["Done", "Failed", "Aborted"]))


def test_a_pending_pilot_is_submitted_and_scancel_makes_it_aborted(slurm_cluster, tmp_path):
    backend = SlurmBackend(log_dir=tmp_path, env=slurm_cluster.env)
    options = {"Partition": "debug", "SlurmOptions": "--begin=now+3600 --comment=held"}
    [ref] = backend.submit_pilots(queue_ref(), 1, args("held", options=options))
    assert backend.status([ref]) == {ref: "Submitted"}
    assert backend.output(ref, 1 << 20) is None                 # not started: no log yet
    backend.kill(ref)
    assert wait_for_states(backend, [ref], {"Aborted"}) == {ref: "Aborted"}
    backend.kill(ref)                                     # already ended: no error
    backend.kill("999994:forgotten")                      # unknown to Slurm: no error either


def test_output_of_a_reference_that_is_not_slurm_s_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="not a Slurm pilot reference: 'host:1:p'"):
        SlurmBackend(log_dir=tmp_path).output("host:1:p", 1 << 20)


def test_squeue_failing_says_nothing(tmp_path):
    backend = SlurmBackend(log_dir=tmp_path, env={"PATH": "/nonexistent"})
    assert backend.status(["1:p"]) == {}


def test_sbatch_failing_is_an_error_naming_it(slurm_cluster, tmp_path):
    backend = SlurmBackend(log_dir=tmp_path, env=slurm_cluster.env)
    with pytest.raises(RuntimeError, match="sbatch failed"):
        backend.submit_pilots(queue_ref(), 1, args("p", options={"Partition": "nosuchpartition"}))
