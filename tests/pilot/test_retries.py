"""A job whose JDL asks for retries (MaxRetries, RetryOnExitCodes), run by a real
pilot against a real `wms server`: it fails with a listed exit code, waits
again, is run again by the pilot, and ends Failed once its retries are spent."""

from __future__ import annotations

from tests.pilot.conftest import jdl, status, submit
from tests.pilot.test_main import PILOT_ID, history, run_pilot


def test_a_failing_job_is_run_again_as_its_jdl_asks_then_left_failed(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("exit 3", "MaxRetries = 1; RetryOnExitCodes = {3, 75};"))
    proc = run_pilot(server, tokens, tmp_path, "--slots", "1")
    assert proc.returncode == 0, proc.stderr

    steps = [(h["Status"], h["MinorStatus"], h["Source"]) for h in history(server, tokens, job)]
    ran = [s for s in steps if s[0] in ("Matched", "Failed") or s[2] == "Retry"]
    assert ran == [("Matched", f"Assigned to pilot {PILOT_ID} (attempt 1)", "Matcher"),
                   ("Failed", "Exit code 3", f"Pilot {PILOT_ID}"),
                   ("Waiting", "Retry 1 of 1: exit code 3", "Retry"),
                   ("Matched", f"Assigned to pilot {PILOT_ID} (attempt 2)", "Matcher"),
                   ("Failed", "Exit code 3", f"Pilot {PILOT_ID}")]
    row = status(server, tokens, job)
    assert (row["Status"], row["MinorStatus"]) == ("Failed", "Exit code 3")
