"""`wms bench match --declared-slots N`: each bench pilot's claims also debit its
declared slots, and a small declaration caps what it gets."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO


def bench_match(tmp_path, *options: str) -> dict:
    """`wms bench match --json` on a SQLite database in ``tmp_path``: its summary."""
    run = subprocess.run(
        [sys.executable, "-m", "wms.cli.main", "bench", "match", "--database", f"sqlite:///{tmp_path / 'b.db'}",
         "--jobs", "2000", "--task-queues", "20", "--threads", "3", "--seconds", "1", "--runs", "1", *options,
         "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_each_bench_pilot_holds_no_more_than_it_declared(tmp_path):
    summary = bench_match(tmp_path, "--declared-slots", "2")
    [run] = summary["runs"]
    assert summary["declared_slots"] == 2 and run["errors"] == 0 and run["overbooked"] == 0
    # Three pilots of 2 slots each; every job takes at least one.
    assert 0 < run["matches"] <= 3 * 2 and run["requests"] > run["matches"]
