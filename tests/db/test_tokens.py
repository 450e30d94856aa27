"""Token queries on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine

from wms.db import tokens as tokens_db

pytestmark = pytest.mark.databases

H1, H2, H3 = "a" * 64, "b" * 64, "ab" + "c" * 62


def test_add_get(engine: Engine, now: datetime) -> None:
    with engine.begin() as conn:
        tokens_db.add_token(conn, H1, "roland", "lhcb_user", "lhcb", "user", "laptop", now)
    with engine.connect() as conn:
        token = tokens_db.get_token(conn, H1)
        assert tokens_db.get_token(conn, H2) is None
    assert token == {
        "token_hash": H1, "user": "roland", "user_group": "lhcb_user", "vo": "lhcb", "role": "user",
        "description": "laptop", "created": now, "expires": None, "pilot_id": None, "revoked": None,
        "slots": None, "isolation": None, "isolation_note": None,
    }


def test_expired_and_revoked_rows_are_still_read_so_the_refusal_can_say_why(engine: Engine, now: datetime) -> None:
    expires = now + timedelta(hours=1)
    with engine.begin() as conn:
        tokens_db.add_token(conn, H1, "pilot", "lhcb_pilot", "lhcb", "pilot", "", now, expires=expires)
        assert tokens_db.revoke(conn, H1, now) is True
        assert tokens_db.revoke(conn, H1, now) is False
        assert tokens_db.set_expiry(conn, H1, expires + timedelta(hours=1)) is False     # revoked: not renewed
    with engine.connect() as conn:
        row = tokens_db.get_token(conn, H1)
    assert (row["expires"], row["revoked"]) == (expires, now)


def test_prefix_lookup_and_listing(engine: Engine, now: datetime) -> None:
    with engine.begin() as conn:
        for n, digest in enumerate((H1, H2, H3)):
            tokens_db.add_token(conn, digest, f"u{n}", "g", "vo", "user", "", now + timedelta(seconds=n))
    with engine.connect() as conn:
        assert [r["token_hash"] for r in tokens_db.tokens_with_prefix(conn, "a")] in ([H1, H3], [H3, H1])
        assert [r["token_hash"] for r in tokens_db.tokens_with_prefix(conn, "ab")] == [H3]
        assert tokens_db.tokens_with_prefix(conn, "d") == []
        assert [r["user"] for r in tokens_db.list_tokens(conn)] == ["u0", "u1", "u2"]


def test_binding_a_pilot_happens_once(engine: Engine, now: datetime) -> None:
    with engine.begin() as conn:
        tokens_db.add_token(conn, H1, "pilot", "lhcb_pilot", "lhcb", "pilot", "", now)
        tokens_db.add_token(conn, H2, "pilot", "lhcb_pilot", "lhcb", "pilot", "", now, pilot_id="p2")
        assert tokens_db.bind_pilot(conn, H1, "p1") is True
        assert tokens_db.bind_pilot(conn, H1, "other") is False
        assert tokens_db.bind_pilot(conn, H2, "p1") is False
        assert tokens_db.pilot_bound_elsewhere(conn, "p1", H2) is True
        assert tokens_db.pilot_bound_elsewhere(conn, "p1", H1) is False
    with engine.connect() as conn:
        assert (tokens_db.get_token(conn, H1)["pilot_id"], tokens_db.get_token(conn, H2)["pilot_id"]) == ("p1", "p2")


def test_pilot_tokens_are_extended_and_revoked_by_pilot(engine: Engine, now: datetime) -> None:
    soon, later = now + timedelta(minutes=5), now + timedelta(hours=2)
    with engine.begin() as conn:
        tokens_db.add_token(conn, H1, "d", "g", "lhcb", "pilot", "", now, expires=soon, pilot_id="p1")
        tokens_db.add_token(conn, H2, "d", "g", "lhcb", "pilot", "", now, expires=later, pilot_id="p2")
        tokens_db.add_token(conn, H3, "d", "g", "lhcb", "pilot", "", now, expires=soon, pilot_id="p3")
        assert tokens_db.extend_pilot_tokens(conn, ["p1", "p2"], now + timedelta(hours=1)) == 1   # p2 ends later
        assert tokens_db.revoke_pilot_tokens(conn, ["p3", "nobody"], now) == 1
        assert tokens_db.revoke_pilot_tokens(conn, [], now) == 0
    with engine.connect() as conn:
        rows = {d: tokens_db.get_token(conn, d) for d in (H1, H2, H3)}
    assert rows[H1]["expires"] == now + timedelta(hours=1) and rows[H2]["expires"] == later
    assert rows[H3]["revoked"] == now and rows[H1]["revoked"] is None


# ---------------------------------------------------------------- the note of ended tokens
def test_every_early_end_of_a_token_is_noted_with_a_new_version(engine: Engine, now: datetime) -> None:
    with engine.begin() as conn:
        assert tokens_db.ended_version(conn) == 0 and tokens_db.ended_after(conn, 0) == (0, [])
        for digest, pilot in ((H1, None), (H2, "p1"), (H3, "p2")):
            tokens_db.add_token(conn, digest, "u", "g", "vo", "pilot", "", now, pilot_id=pilot)
    with engine.begin() as conn:
        assert tokens_db.revoke(conn, H1, now) is True
        assert tokens_db.revoke(conn, H1, now) is False                  # nothing ended: nothing noted
    with engine.begin() as conn:
        assert tokens_db.revoke_pilot_tokens(conn, ["p1", "p2", "nobody"], now) == 2
        assert tokens_db.revoke_pilot_tokens(conn, ["p1"], now) == 0
    with engine.connect() as conn:
        assert tokens_db.ended_version(conn) == 2                         # one version per transaction
        version, ended = tokens_db.ended_after(conn, 0)
        assert version == 2 and ended is not None
        assert (ended[0], sorted(ended[1:3])) == (H1, sorted([H2, H3]))   # revoked, the pilots'
        version, since = tokens_db.ended_after(conn, 1)
        assert version == 2 and sorted(since or []) == sorted([H2, H3])
        assert tokens_db.ended_after(conn, 2) == (2, [])
        assert tokens_db.ended_after(conn, 3) == (2, None)                # made again lower: unknown


def test_the_note_keeps_its_last_lines_whole_versions_at_a_time(engine: Engine, now: datetime,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens_db, "ENDED_KEPT", 4)
    digests = [f"{n:064x}" for n in range(7)]
    for batch in (digests[0:2], digests[2:5], digests[5:7]):       # versions 1, 2, 3
        with engine.begin() as conn:
            tokens_db.note_ended(conn, batch, now)
    with engine.connect() as conn:
        # Five lines would be one too many; version 2's three go whole, not one of them.
        assert tokens_db.ended_after(conn, 2) == (3, digests[5:7])
        assert tokens_db.ended_after(conn, 1) == (3, None)               # version 2 is no longer there
        assert tokens_db.ended_after(conn, 0) == (3, None)
