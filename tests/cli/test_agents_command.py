"""`wms agents` runs the periodic agents in-process until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.helpers import REPO


def test_wms_agents_runs_and_stops_on_ctrl_c(tmp_path):
    env = {**os.environ, "WMS_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}", "HOME": str(tmp_path)}
    wms = [sys.executable, "-m", "wms.cli.main"]
    subprocess.run([*wms, "db", "upgrade"], env=env, cwd=REPO, check=True, capture_output=True)
    process = subprocess.Popen([*wms, "agents"], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=15) == 0
    err = process.stderr.read()
    assert "running lease_reaper, reservation_manager, site_director, submit_pool_cleaner, submit_pool_refresher" in err
    assert "Traceback" not in err
