"""`wms bench http` runs a real server and real pilots over HTTP, and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO


def test_bench_http_reports_matches_latency_and_server_cpu(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "wms.cli.main", "bench", "http", "--database", f"sqlite:///{tmp_path / 'b.db'}",
         "--jobs", "4000", "--task-queues", "20", "--pilots", "1,3", "--seconds", "1.5", "--threads", "2", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["duplicates"] == 0 and summary["in_process_matches_per_second"] > 0
    assert [row["pilots"] for row in summary["rows"]] == [1, 3]
    for row in summary["rows"]:
        assert row["errors"] == 0, row["first_error"]
        assert row["matches_per_second"] > 0 and row["p50_ms"] <= row["p99_ms"]
        assert row["server_cpu_ms_per_match"] > 0


def test_bench_http_refuses_a_bad_list_of_pilots():
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--pilots", "4,zero"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "a comma-separated list of numbers, got '4,zero'" in run.stderr


def test_bench_http_batch_asks_for_several_jobs_a_request(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "wms.cli.main", "bench", "http", "--database", f"sqlite:///{tmp_path / 'b.db'}",
         "--jobs", "4000", "--task-queues", "20", "--pilots", "2", "--seconds", "1.5", "--threads", "2",
         "--batch", "4", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["batch"] == 4 and summary["duplicates"] == 0
    [row] = summary["raw"][0]["rows"]
    assert row["errors"] == 0, row["first_error"]
    # More jobs than requests: the answers carry several jobs each.
    assert row["matches_per_second"] > row["requests_per_second"] > 0


def test_bench_http_refuses_a_batch_over_64():
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--batch", "65"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "at most 64 jobs a request, got '65'" in run.stderr
