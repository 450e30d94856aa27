from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ADMIN, ANDRE, OPERATOR, PILOT, ROLAND, default_config
from wms.api.app import create_app
from wms.core.identity import Identity
from wms.services.runtime import Runtime
from wms.services.tokens import create_token


@pytest.fixture
def runtime(engine) -> Runtime:
    return Runtime.create(default_config(), engine)


@pytest.fixture
def client(runtime) -> TestClient:
    return TestClient(create_app(runtime))


@pytest.fixture
def tokens(runtime) -> dict[str, str]:
    """A bearer token for each test identity, by user name."""
    now = datetime.now(timezone.utc)
    return {ident.user: create_token(runtime.engine, ident, now) for ident in (ROLAND, ANDRE, ADMIN, OPERATOR, PILOT)}


@pytest.fixture
def as_user(client, tokens):
    """``as_user("roland").get(...)``: requests carrying that user's token."""

    class Caller:
        def __init__(self, user: str) -> None:
            self.headers = {"Authorization": f"Bearer {tokens[user]}"}

        def get(self, path, **kw):
            return client.get("/api/v1" + path, headers=self.headers, **kw)

        def post(self, path, body):
            return client.post("/api/v1" + path, headers=self.headers, json=body)

        def delete(self, path):
            return client.delete("/api/v1" + path, headers=self.headers)

    return Caller


@pytest.fixture
def caller(client):
    """``caller(token)``: calls of the API as that token's holder."""
    from tests.api.test_pilot_credentials import Caller
    return lambda token: Caller(client, token)


@pytest.fixture
def pilot_of(runtime, caller):
    """``pilot_of("p1")``: a caller with a token bound to pilot p1 (as the SiteDirector issues them)."""
    def make(pilot_id: str, vo: str = "lhcb", lifetime: timedelta | None = timedelta(hours=1)):
        identity = Identity(user="site-director", group=f"{vo}_pilot", vo=vo, role="pilot", pilot_id=pilot_id)
        return caller(create_token(runtime.engine, identity, datetime.now(timezone.utc), lifetime=lifetime))
    return make
