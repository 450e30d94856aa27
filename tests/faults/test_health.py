"""A real `wms server` on a PostgreSQL of its own: /api/v1/health answers
503 while the database is down and "ok" again once it is back, and the
server lives on."""

from __future__ import annotations

import httpx

from tests.faults.databases import PrivatePostgres
from tests.helpers import tail, wait_until
from tests.servers import running_server


def test_health_follows_the_database_down_and_up(tmp_path):
    database = PrivatePostgres()
    try:
        with running_server(tmp_path / "server", database_url=database.url()) as server:
            def health() -> httpx.Response:
                return httpx.get(server.url + "/api/v1/health", timeout=30)

            assert health().json()["database"] == "ok"
            database.crash()
            down = wait_until(lambda: (answer := health()).status_code == 503 and answer, timeout=60,
                              what="health says 503 with the database down", details=lambda: tail(server.log))
            assert down.json()["status"] == "not ok" and down.json()["database"] == "not answering"
            assert "health: the database does not answer" in server.log.read_text()
            database.start()
            wait_until(lambda: health().status_code == 200, timeout=60, what="health is ok again",
                       details=lambda: tail(server.log))
            assert server.process is not None and server.process.poll() is None
    finally:
        database.close(keep_log=tmp_path / "postgresql.log")
