"""`wms bench e2e` runs jobs through a real server and real pilots to Done,
reports where their time went from what the system recorded, and runs the
same jobs as a job array of a private Slurm."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.e2e.processes import missing_service
from tests.helpers import REPO
from wms.bench.slurm import why_not_runnable
from wms.bench.timeline import STAGES


def bench_e2e(tmp_path, *options: str, expect: int = 0, path: str = "/usr/bin:/bin",
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`wms bench e2e OPTIONS` on SQLite; its exit status must be ``expect``."""
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "e2e", *options],
                         cwd=REPO, capture_output=True, text=True, timeout=240,
                         env={"HOME": str(tmp_path), "PATH": path, **(env or {})})
    assert run.returncode == expect, run.stderr[-4000:]
    return run


def test_every_job_goes_through_every_stage_to_done(tmp_path):
    summary = json.loads(bench_e2e(tmp_path, "--jobs", "20", "--pilots", "2", "--slots", "2", "--json").stdout)
    assert summary["all_done"] and summary["slots"] == 4 and summary["slurm"] is None
    assert summary["isolation"] == "bubblewrap" and summary["payload"] == "/bin/true"
    assert [len(summary["load_average"][when]) for when in ("start", "end")] == [3, 3]
    wms = summary["wms"]
    assert wms["done"] == 20 and wms["states"] == {"Done": 20}
    assert wms["jobs_per_second"] == pytest.approx(20 / wms["seconds"], rel=0.01)     # both rounded
    assert 0 < wms["first_matched_after"] < wms["seconds"]
    assert [stage["stage"] for stage in wms["stages"]] == [name for name, _, _ in STAGES]
    for stage in wms["stages"]:
        assert stage["jobs"] == 20 and stage["missing"] == 0, stage
        assert 0 <= stage["median_ms"] <= stage["p99_ms"] <= stage["max_ms"], stage
    # A job waits from when the optimizer chain filed it, later than the submission arrived.
    assert wms["stages"][0]["median_ms"] > 0
    cpu = wms["cpu_ms_per_job"]
    assert cpu["server"] > 0 and cpu["database"] is None      # SQLite: inside the server
    assert 0 < cpu["payloads"] < cpu["pilots"]                # the jobs' processes are the pilots' children
    http = wms["http"]
    assert http["refused"] == 0 and http["by_route"]["POST /api/v1/jobs"] == 1
    # Each job's Running report and its Done report, which carries its output: several
    # in one call when the slots report at once, so at most two calls a job.
    assert 2 <= http["by_route"]["POST /api/v1/jobs/pilot-status"] <= 40
    assert "POST /api/v1/jobs/{job_id}/pilot-status" not in http["by_route"]
    assert "POST /api/v1/jobs/{job_id}/output" not in http["by_route"]
    assert http["requests_per_job"] == round(http["requests"] / 20, 2)


def test_the_table_says_the_rate_the_stages_and_the_cpu(tmp_path):
    out = bench_e2e(tmp_path, "--jobs", "4", "--pilots", "1", "--slots", "2", "--isolation", "none",
                    "--max-in-flight", "64").stdout
    assert "isolation none" in out and "wms: 4/4 Done in" in out and "at the start," in out
    assert "max_in_flight 64" in out
    for name, _, _ in STAGES:
        assert name in out
    assert "CPU per job: server" in out and "database in the server (SQLite)" in out


def test_jobs_whose_payload_fails_are_reported_and_the_bench_fails(tmp_path):
    run = bench_e2e(tmp_path, "--jobs", "3", "--pilots", "1", "--slots", "3", "--payload", "/bin/false", "--json",
                    expect=1)
    summary = json.loads(run.stdout)
    assert not summary["all_done"] and summary["payload"] == "/bin/false"
    assert summary["wms"]["states"] == {"Failed": 3} and summary["wms"]["done"] == 0
    assert summary["wms"]["jobs_per_second"] is None
    last = summary["wms"]["stages"][-1]
    assert last["stage"] == "payload end -> Done" and last["jobs"] == 0 and last["missing"] == 3


@pytest.mark.xdist_group("slurm")
def test_the_same_jobs_run_as_one_array_of_a_private_slurm(tmp_path):
    reason = why_not_runnable()
    if reason is not None:
        missing_service(reason)
    run = bench_e2e(tmp_path, "--jobs", "5", "--pilots", "1", "--slots", "2", "--isolation", "none",
                    "--against", "slurm", "--settle", "0.5", "--json")
    summary = json.loads(run.stdout)
    assert "waiting 0.5 s before the Slurm part (--settle)" in run.stderr
    slurm = summary["slurm"]
    assert summary["all_done"] and slurm["cpus"] == 2 and slurm["jobs"] == 5
    assert slurm["completed"] == 5 and slurm["states"] == {"COMPLETED 0:0": 5}
    assert slurm["jobs_per_second"] == round(5 / slurm["seconds"], 2)
    assert summary["wms_over_slurm"] == round(summary["wms"]["jobs_per_second"] / slurm["jobs_per_second"], 3)


@pytest.mark.parametrize("payload, message", [
    ("", "argument --payload: give a command to run, e.g. /bin/true"),
    ("/bin/echo 'unclosed", "argument --payload: not a command line (No closing quotation): \"/bin/echo 'unclosed\""),
])
def test_a_payload_that_is_no_command_line_is_refused(tmp_path, payload, message):
    run = bench_e2e(tmp_path, "--payload", payload, expect=2)
    assert message in run.stderr


def test_against_slurm_without_slurm_says_what_is_missing_before_running_anything(tmp_path):
    """Without sbatch on the path (nor in the sbin directories) the comparison cannot be made: said at once."""
    run = bench_e2e(tmp_path, "--against", "slurm", expect=1, path=str(tmp_path))
    assert "wms bench: --against slurm: a private Slurm needs the packages slurm-wlm" in run.stderr
    assert "(make test-packages)" in run.stderr and "submitting" not in run.stderr


def test_a_machine_without_bwrap_is_told_so_at_once(tmp_path):
    """Pilots that cannot isolate take none of the bench's jobs: said before anything starts."""
    run = bench_e2e(tmp_path, "--jobs", "4", "--pilots", "1", "--slots", "2", expect=1, path=str(tmp_path))
    assert run.stderr.strip().splitlines()[-1] == (
        "wms bench: --isolation bubblewrap: bwrap is not installed (not found on PATH; make test-packages, as root, "
        "installs it); or run the payloads unisolated (--isolation none)")


def test_more_jobs_than_one_submission_may_make_go_in_several(tmp_path):
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    settings = config / "wms.yaml"
    settings.write_text(settings.read_text().replace("max_jobs_per_submission: 10000", "max_jobs_per_submission: 5"))
    summary = json.loads(bench_e2e(tmp_path, "--jobs", "12", "--pilots", "1", "--slots", "4", "--json",
                                   env={"WMS_CONFIG": str(config)}).stdout)
    assert summary["wms"]["done"] == 12 and summary["wms"]["http"]["by_route"]["POST /api/v1/jobs"] == 3
