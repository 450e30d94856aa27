"""The SiteDirector with the ssh backend, against a real `wms server` and
an sshd of the session's own: a queue with `Backend: ssh` gets pilots on
the node, they run the jobs, and their end and logs come back."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone

from agents.site_director import site_director
from tests.e2e.backend_queues import SSH_QUEUE, SSH_SITE, resources, site_jobs
from tests.helpers import CONFIG_DIR, log_tails, wait_until
from tests.pilot_backends import wait_jobs_done
from tests.servers import running_server
from wms.config import load_config
from wms.db.engine import make_engine
from wms.services import pilots as pilots_service
from wms.services.runtime import Runtime

def test_ssh_pilots_run_the_jobs_of_their_queue(ssh_server, tmp_path):
    config = tmp_path / "edited"
    shutil.copytree(CONFIG_DIR, config)
    (config / "resources.yaml").write_text(resources(ssh_server=ssh_server, node_dir=tmp_path / "node"))
    with running_server(tmp_path, config_dir=config) as server:
        roland = server.token("roland", "lhcb_user", "lhcb", "user")
        jdl = tmp_path / "ssh.jdl"
        jdl.write_text(site_jobs(SSH_SITE, "ssh", 4, "echo job $WMS_JOB_ID"))
        ids = [int(i) for i in server.json("submit", str(jdl), token=roland)["job_ids"]]

        runtime = Runtime.create(load_config(server.config), make_engine(server.env["WMS_DATABASE_URL"]))
        launcher = pilots_service.make_launcher(
            runtime, url=server.url, log_dir=tmp_path / "pilots",
            pilot_options=("--max-empty", "2", "--poll", "0.3", "--heartbeat", "1"))
        report = site_director(runtime, datetime.now(timezone.utc), launcher=launcher)
        assert report["submitted"] == {SSH_QUEUE: 2} and report["errors"] == {}, report

        rows = wait_jobs_done(server, ids, roland)
        assert [r["Status"] for r in rows] == ["Done"] * 4 and {r["Queue"] for r in rows} == {SSH_QUEUE}, rows
        assert server.json("output", str(ids[0]), token=roland)["stdout"] == f"job {ids[0]}\n"

        def ended() -> list:
            site_director(runtime, datetime.now(timezone.utc), launcher=launcher)
            shown = pilots_service.list_pilots(runtime)
            return shown if all(p["State"] not in ("Submitted", "Running") for p in shown) else []

        shown = wait_until(ended, timeout=120, what="the ssh pilots ended", every=0.3,
                           details=lambda: log_tails((tmp_path / "pilots").glob("*.log")))
        assert [(p["Backend"], p["State"]) for p in shown] == [("ssh", "Done")] * 2, shown
        assert sum(p["JobsRun"] for p in shown) == 4
        for pilot in shown:
            assert pilot["BackendRef"].startswith(f"ssh://{ssh_server.user}@127.0.0.1:{ssh_server.port}/")
            assert "starting against" in (tmp_path / "pilots" / f"{pilot['PilotID']}.log").read_text()
        runtime.engine.dispose()
