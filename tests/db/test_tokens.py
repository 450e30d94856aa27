"""Token queries on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine

from wms.db import tokens as tokens_db

pytestmark = pytest.mark.databases

H1, H2 = "a" * 64, "b" * 64


def test_add_get_delete(engine: Engine, now: datetime) -> None:
    with engine.begin() as conn:
        tokens_db.add_token(conn, H1, "roland", "lhcb_user", "lhcb", "user", "laptop", now)
    with engine.connect() as conn:
        token = tokens_db.get_token(conn, H1, now + timedelta(days=3650))
        assert tokens_db.get_token(conn, H2, now) is None
    assert token == {
        "token_hash": H1, "user": "roland", "user_group": "lhcb_user", "vo": "lhcb", "role": "user",
        "description": "laptop", "created": now, "expires": None,
    }
    with engine.begin() as conn:
        assert tokens_db.delete_token(conn, H1) is True
        assert tokens_db.delete_token(conn, H1) is False
    with engine.connect() as conn:
        assert tokens_db.get_token(conn, H1, now) is None


def test_expired_token_is_not_found(engine: Engine, now: datetime) -> None:
    expires = now + timedelta(hours=1)
    with engine.begin() as conn:
        tokens_db.add_token(conn, H1, "pilot", "lhcb_pilot", "lhcb", "pilot", "", now, expires=expires)
    with engine.connect() as conn:
        assert tokens_db.get_token(conn, H1, now)["expires"] == expires
        assert tokens_db.get_token(conn, H1, expires - timedelta(microseconds=1)) is not None
        assert tokens_db.get_token(conn, H1, expires) is None
        assert tokens_db.get_token(conn, H1, expires + timedelta(days=1)) is None
