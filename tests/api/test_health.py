"""/api/v1/health says "ok" only when the database answers; otherwise 503
with what is not ok (the driver's reason, which names hosts, goes to the
log only: the check is public)."""

from __future__ import annotations

import logging

import pytest

from fastapi.testclient import TestClient

from tests.helpers import default_config
from tests.servers import free_port
from wms.api.app import create_app
from wms.db.engine import make_engine
from wms.services.runtime import Runtime


def test_health_is_ok_when_the_database_answers(client):
    answer = client.get("/api/v1/health")
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok" and answer.json()["database"] == "ok"


def test_health_is_503_with_what_is_not_ok_when_the_database_does_not_answer(caplog):
    engine = make_engine(f"postgresql://wms@127.0.0.1:{free_port()}/wms")
    client = TestClient(create_app(Runtime.create(default_config(), engine)))
    with caplog.at_level(logging.WARNING, logger="wms.api"):
        answer = client.get("/api/v1/health", headers={"X-Request-ID": "lb-probe-1"})
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "5"
    assert answer.json() == {"detail": "database: not answering (the server log says why)", "status": "not ok",
                             "version": answer.json()["version"], "database": "not answering",
                             "request_id": "lb-probe-1"}
    [record] = [r for r in caplog.records if r.name == "wms.api"]
    assert "Connection refused" in record.getMessage()
    engine.dispose()


UNREACHABLE = {
    "postgresql": "postgresql://wms@127.0.0.1:{port}/wms",
    "mariadb": "mysql://root@127.0.0.1:{port}/wms",
    "sqlite": "sqlite:///{tmp}/wms.db",       # a directory of that name: the file cannot be opened
}


@pytest.mark.parametrize("backend", sorted(UNREACHABLE))
def test_every_call_is_503_with_retry_after_while_the_database_is_away(backend, caplog, tmp_path):
    """Not 500 "internal server error": the caller is told to come back, as
    /health says, and the driver's reason (hosts, ports, paths) stays in the log."""
    (tmp_path / "wms.db").mkdir()
    engine = make_engine(UNREACHABLE[backend].format(port=free_port(), tmp=tmp_path))
    client = TestClient(create_app(Runtime.create(default_config(), engine)), raise_server_exceptions=False)
    bearer = {"Authorization": "Bearer wms_" + "0" * 40}
    calls = [
        ("GET", "/api/v1/jobs", None),
        ("POST", "/api/v1/jobs", {"jdl": '[ Executable = "/bin/true"; ]'}),
        ("POST", "/api/v1/matcher/request-job", {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default"}),
    ]
    with caplog.at_level(logging.WARNING, logger="wms.api"):
        for method, path, body in calls:
            answer = client.request(method, path, json=body, headers={**bearer, "X-Request-ID": "away-1"})
            assert answer.status_code == 503, (path, answer.text)
            assert answer.headers["retry-after"] == "5"
            assert answer.json() == {"detail": "the database is not answering (request id away-1; the server log "
                                               "has the details); try again in 5 s", "request_id": "away-1"}
    assert [r for r in caplog.records if r.getMessage().startswith("database not answering: ")]
    engine.dispose()
