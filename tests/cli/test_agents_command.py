"""`wms agents` runs the periodic agents in-process until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.helpers import REPO, interruptible, patience, tail, wait_until

RUNNING = "running job_purger, lease_reaper, reservation_manager, sandbox_cleaner, site_director, submit_pool_cleaner, submit_pool_refresher"


def test_wms_agents_runs_and_stops_on_ctrl_c(tmp_path):
    env = {**os.environ, "WMS_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}", "HOME": str(tmp_path)}
    wms = [sys.executable, "-m", "wms.cli.main"]
    subprocess.run([*wms, "db", "upgrade"], env=env, cwd=REPO, check=True, capture_output=True)
    log = tmp_path / "agents.log"
    with log.open("w") as err:
        process = subprocess.Popen([*wms, "agents"], env=env, cwd=REPO, stderr=err, text=True,
                                   preexec_fn=interruptible)
    try:
        # Started (however long a loaded machine takes), and still running.
        wait_until(lambda: RUNNING in log.read_text() or process.poll() is not None, timeout=60,
                   what="wms agents started", details=lambda: tail(log))
        assert process.poll() is None, tail(log)
        # Each run is one line at INFO, the default level.
        wait_until(lambda: "INFO    wms.agents agent lease_reaper ran in " in log.read_text(), timeout=60,
                   what="a run of the lease reaper logged", details=lambda: tail(log))
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=patience(60)) == 0, tail(log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    err = log.read_text()
    assert RUNNING in err
    assert "Traceback" not in err
