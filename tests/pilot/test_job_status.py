"""`python -m pilot.job_status`, the payload's helper, against a real `wms server`:
with the environment the pilot gives a payload, it sets its job's application
status and reads the job; once the attempt is over it is refused, exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import REPO, patience
from tests.pilot.conftest import status, submit, jdl
from tests.pilot.test_client import client, request_body


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WMS_")}
    return subprocess.run([sys.executable, "-m", "pilot.job_status", *args], cwd=REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=patience(60))


def test_a_payload_sets_its_application_status_until_its_job_ends(server, tokens, tmp_path):
    [job_id] = submit(server, tokens, tmp_path, jdl("true"))
    pilot = client(server.url, tokens["js-pilot"])
    answer = pilot.request_job(request_body(status(server, tokens, job_id)["SubmitPool"], "js-pilot"))
    assert answer["match"] and answer["job"]["JobID"] == job_id, answer
    job = answer["job"]
    pilot.pilot_status(job_id, "js-pilot", "Running", "Application", None, attempt=job["Attempt"])
    env = {"WMS_URL": server.url, "WMS_JOB_ID": str(job_id), "WMS_JOB_TOKEN": job["JobToken"]}

    done = run(env, "Reconstructing event 500")
    assert done.returncode == 0, done.stderr
    assert status(server, tokens, job_id)["MinorStatus"] == "Application: Reconstructing event 500"
    shown = run(env, "--show")
    assert shown.returncode == 0 and json.loads(shown.stdout)["Status"] == "Running", shown.stderr

    refused = run(env, "two\nlines")
    assert refused.returncode == 1 and refused.stderr.startswith("job_status: "), refused.stderr
    pilot.pilot_status(job_id, "js-pilot", "Done", "", 0, attempt=job["Attempt"])
    late = run(env, "event 501")
    assert late.returncode == 1
    assert late.stderr.strip() == (f"job_status: job token of job {job_id} attempt {job['Attempt']}: "
                                   "that attempt is over (job is Done)")
    assert status(server, tokens, job_id)["MinorStatus"] == "Execution complete"


def test_outside_a_job_it_says_what_is_missing(tmp_path):
    missing = run({}, "hello")
    assert missing.returncode == 2
    assert "WMS_URL, WMS_JOB_ID, WMS_JOB_TOKEN not set" in missing.stderr
    assert run({"WMS_URL": "http://127.0.0.1:9", "WMS_JOB_ID": "1", "WMS_JOB_TOKEN": "wmsj_x"}).returncode == 2
    unreachable = run({"WMS_URL": "http://127.0.0.1:9", "WMS_JOB_ID": "1", "WMS_JOB_TOKEN": "wmsj_x"}, "hello")
    assert unreachable.returncode == 3, unreachable.stderr
