"""The distributed set-up end to end (docs/deployment.md): PostgreSQL, a Redis
of the test's own, `wms server`, `celery -A agents worker` and
`celery -A agents beat` as separate processes, local pilots started by the
SiteDirector agent in the worker.

200 jobs of eight kinds end Done, each on a queue it is eligible for; the
pilot running the long job is SIGKILLed and the job runs again elsewhere;
Redis is killed and restarted on the same port meanwhile, and nothing is
lost; the SubmitPoolCleaner then drops every pool.
"""

from __future__ import annotations

import subprocess

from tests.e2e.processes import celery, stop
from tests.e2e.scenario import Run, environment, write_config
from tests.servers import ServerHandle, free_port


def test_distributed_run_survives_a_dead_pilot_and_a_redis_restart(tmp_path, database_factory, private_redis):
    database_url = database_factory("postgresql")
    url = f"http://127.0.0.1:{free_port()}"
    config = write_config(tmp_path, database_url=database_url, broker_url=private_redis.url(0),
                          bind=url.removeprefix("http://"))
    env = environment(tmp_path, config, url)
    server = ServerHandle(tmp_path, config, url, env)
    server.ok("db", "upgrade")

    processes: list[subprocess.Popen] = []
    run: Run | None = None
    try:
        server.start()
        worker, worker_log = celery(tmp_path, env, "worker", "--pool", "prefork", "--concurrency", "2",
                                    "-n", "e2e@%h", "--loglevel", "info", "--without-gossip",
                                    "--without-mingle", log_name="worker.log")
        beat, beat_log = celery(tmp_path, env, "beat", "-s", str(tmp_path / "beat-schedule"),
                                "--loglevel", "info", log_name="beat.log")
        processes += [worker, beat]
        run = Run(server, logs=[server.log, worker_log, beat_log, private_redis.log])
        run.submit()
        run.start_killer()
        run.check_match_queues()

        run.join_killer()
        # Redis dies with its queued messages and locks while the dead pilot's
        # job waits to be reaped: the reaping and the rest happen after it.
        private_redis.restart(down_for=3)
        run.mark("redis restarted")

        run.finish(database_url)

        for process, name in ((worker, "worker"), (beat, "beat")):
            assert process.poll() is None, f"celery {name} exited ({process.returncode})"
        assert "Sending due task" in beat_log.read_text()
        after_loss = worker_log.read_text().split("Connection to broker lost", 1)
        assert len(after_loss) == 2 and "Connected to " in after_loss[1], "the worker did not reconnect"
        assert "Unrecoverable error" not in after_loss[1]
        print("timings (s):", run.timings)
    finally:
        # The worker starts pilots: stop it (and beat) first, then its pilots, then the server.
        def stop_agents() -> None:
            for process in reversed(processes):
                stop(process)

        if run is not None:
            run.stop_starting_pilots(stop_agents)
            run.cleanup_pilots()
        stop_agents()
        server.stop()
