"""A submission past a cap answers 409 with the cap and the count, and
stores nothing (wms.yaml ``caps``; tests/services/test_caps.py has the rules)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ROLAND, default_config
from wms.api.app import create_app
from wms.config.models import CapsSettings
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases


def test_a_submission_past_the_users_cap_is_a_409_that_names_the_cap(engine):
    config = default_config()
    settings = config.settings.model_copy(update={"caps": CapsSettings(user_jobs=5)})
    client = TestClient(create_app(Runtime.create(dataclasses.replace(config, settings=settings), engine)))
    headers = {"Authorization": f"Bearer {create_token(engine, ROLAND, datetime.now(timezone.utc))}"}

    def submit(count: int):
        text = f'[ Executable = "/bin/true"; Parameters = {count}; ]'
        return client.post("/api/v1/jobs", json={"jdls": [{"source": "many.jdl", "text": text}]}, headers=headers)

    assert submit(5).status_code == 201
    refused = submit(2)
    assert refused.status_code == 409
    assert refused.json()["detail"] == ("user roland has 5 jobs not yet final; the cap is 5 (caps.user_jobs); "
                                        "this submission adds 2"), refused.json()
    assert len(client.get("/api/v1/jobs", headers=headers).json()) == 5
