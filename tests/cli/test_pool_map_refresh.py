"""A queue added to resources.yaml: `wms why` says the pool map predates it
and how to refresh it; `wms admin pools refresh` does so at once; the
Celery workers refresh it when they start (tests/agents/test_celery.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timezone

from tests.helpers import CONFIG_DIR, ROLAND, patience
from tests.servers import WMS
from wms.config import load_config
from wms.db.engine import make_engine
from wms.db.migrate import upgrade
from wms.services import diagnosis
from wms.services import pools as pools_service
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

NEW_QUEUE = """
  LCG.NEW.org:
    CEs:
      ce.new.org:
        Platform: x86_64-el9
        SoftwareTag: [AppVersion7]
        Queues:
          long: {CPUTime: 86400, MaxTotalPilots: 2}
"""
NEEDS_7 = '[ Executable = "/bin/true"; Requirements = [ SoftwareTag = "AppVersion7"; ]; ]'


def test_a_new_queue_is_named_stale_in_why_until_the_map_is_refreshed(tmp_path):
    config_dir = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config_dir)
    url = f"sqlite:///{tmp_path / 'wms.db'}"
    upgrade(url)
    engine = make_engine(url)
    now = datetime.now(timezone.utc)
    before = Runtime.create(load_config(config_dir), engine)
    [job] = submit_jobs(before, ROLAND, [("a.jdl", NEEDS_7)], SubmitOptions(), now)
    pools_service.refresh_submit_pools(before, now)

    # The site adds a queue that offers AppVersion7; the server restarts with it.
    with (config_dir / "resources.yaml").open("a") as resources:
        resources.write(NEW_QUEUE)
    after = Runtime.create(load_config(config_dir), engine)
    [entry] = [q for q in diagnosis.why(after, ROLAND, job, now)["Queues"] if q["Queue"] == "LCG.NEW.org/ce.new.org/long"]
    assert entry["Layer"] == "pools"
    assert entry["Reason"].endswith(
        f": the SubmitPool map was last refreshed at {now.isoformat()}, from another configuration than this "
        "server's; the agents refresh it when they start and every submit_pool_refresh seconds, "
        "`wms admin pools refresh` at once")

    environ = {**os.environ, "WMS_CONFIG": str(config_dir), "WMS_DATABASE_URL": url}
    done = subprocess.run([*WMS, "admin", "pools", "refresh"], env=environ, capture_output=True, text=True,
                          cwd=tmp_path, timeout=patience(60))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"SubmitPool map refreshed from {config_dir}: 1 pools, 1 task queues, "
                           "1 waiting jobs changed their status\n")
    [entry] = [q for q in diagnosis.why(after, ROLAND, job, now)["Queues"] if q["Queue"] == "LCG.NEW.org/ce.new.org/long"]
    assert entry["Reason"] == diagnosis.ELIGIBLE, entry
    assert pools_service.pool_map_stamp(after)["fingerprint"] == after.config.pool_map_fingerprint
    engine.dispose()
