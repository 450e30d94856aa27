"""The embedded default end to end: one `wms up` process (API, Matcher, the
agents on the in-process scheduler, the local computing element) on SQLite,
no Redis. The same scenario as the distributed test: 200 jobs of eight kinds
end Done on queues they are eligible for, the pilot running the long job is
SIGKILLed and the job runs again, and the SubmitPoolCleaner drops every pool.
"""

from __future__ import annotations

from tests.e2e.processes import EmbeddedHandle
from tests.e2e.scenario import Run, environment, write_config
from tests.servers import free_port


def test_embedded_run_survives_a_dead_pilot(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    database_url = f"sqlite:///{tmp_path / 'wms.db'}"
    config = write_config(tmp_path, database_url=database_url,
                          bind=url.removeprefix("http://"))
    server = EmbeddedHandle(tmp_path, config, url, environment(tmp_path, config, url))
    run: Run | None = None
    try:
        server.start()
        run = Run(server, logs=[server.log])
        run.submit()
        run.start_killer()
        run.check_match_queues()
        run.join_killer()
        run.finish(database_url)
        assert server.process is not None and server.process.poll() is None
        assert (tmp_path / "var" / "pilots" / f"{run.killed_pilot}.log").exists()
        # wms up's pilots run their jobs in a sandbox (bubblewrap: `make test` installs it).
        pilot_logs = [p.read_text() for p in (tmp_path / "var" / "pilots").glob("*.log")]
        assert pilot_logs and all("payloads run isolated: bubblewrap" in text for text in pilot_logs
                                  if "slot(s), lifetime" in text)
        # The log at the default level: each agent run, each pilot sent, each match; no token.
        log = server.log.read_text()
        assert "INFO    wms.agents agent site_director ran in " in log
        assert f"pilot {run.killed_pilot} submitted to " in log
        assert f" matched to pilot {run.killed_pilot} on " in log
        assert run.user not in log and run.manager not in log
        print("timings (s):", run.timings)
    finally:
        if run is not None:
            run.stop_starting_pilots(server.stop)
            run.cleanup_pilots()
        server.stop()
