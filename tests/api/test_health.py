"""/api/v1/health says "ok" only when the database answers; otherwise 503
with what is not ok (the driver's reason, which names hosts, goes to the
log only: the check is public)."""

from __future__ import annotations

import logging

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
