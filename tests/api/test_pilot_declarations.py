"""A pilot declares its slots and isolation when it renews its token, and
its token never holds more slots than declared (docs/security.md, "Pilots
and tokens"), over HTTP on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from tests.api.test_pilot_credentials import HELLO, Caller, request, submit
from wms.core.identity import Identity
from wms.db import pilots as pilots_db
from wms.db import schema
from wms.services import tokens as tokens_service
from wms.services.tokens import create_token, token_hash

pytestmark = pytest.mark.databases

RENEW = "/pilots/token/renew"


@pytest.fixture
def hand_pilot(runtime, client):
    """A caller with a hand-made pilot token (`wms admin token create --role pilot`), not bound yet."""
    def make() -> tuple[Caller, str]:
        identity = Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot")
        token = create_token(runtime.engine, identity, datetime.now(timezone.utc), lifetime=timedelta(hours=1))
        return Caller(client, token), token
    return make


def token_row(runtime, token: str) -> dict:
    with runtime.engine.connect() as conn:
        return dict(conn.execute(select(schema.tokens).where(schema.tokens.c.token_hash == token_hash(token)))
                    .mappings().one())


def held_slots(runtime, pilot_id: str) -> float | None:
    with runtime.engine.connect() as conn:
        return conn.execute(select(schema.resource_usage.c.used).where(
            schema.resource_usage.c.scope == f"pilot:{pilot_id}", schema.resource_usage.c.resource == "slots")
        ).scalar()


def test_the_first_declaration_fixes_the_slots_a_later_one_may_only_lower_them(runtime, hand_pilot):
    pilot, token = hand_pilot()
    answer = pilot.post(RENEW, {"pilot_id": "hand-4", "slots": 4, "isolation": "bubblewrap"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["Slots"] == 4 and answer.json()["Isolation"] == "bubblewrap"
    before = token_row(runtime, token)
    response = pilot.post(RENEW, {"slots": 8, "isolation": "none", "isolation_note": "chosen with --isolation none"})
    assert response.status_code == 403
    assert response.json()["detail"] == "pilot hand-4 declared 4 slots; it cannot take 8 now"
    assert token_row(runtime, token) == before          # refused: nothing changed, not even the end
    assert pilot.post(RENEW, {"slots": 4}).json()["Slots"] == 4
    assert pilot.post(RENEW, {"slots": 2}).json()["Slots"] == 2
    response = pilot.post(RENEW, {"slots": 3})
    assert response.status_code == 403 and "declared 2 slots; it cannot take 3 now" in response.json()["detail"]
    # A renewal that declares nothing keeps what was declared.
    assert pilot.post(RENEW, {}).json() | {"ExpiresIn": 0, "Expires": ""} == {
        "TokenID": tokens_service.token_id(token_hash(token)), "PilotID": "hand-4", "Expires": "", "ExpiresIn": 0,
        "Lifetime": answer.json()["Lifetime"], "Slots": 2, "Isolation": "bubblewrap"}


def test_isolation_may_be_declared_again_and_reaches_a_site_director_pilots_row(runtime, client, tokens, now):
    identity = Identity(user="site-director", group="lhcb_pilot", vo="lhcb", role="pilot", pilot_id="sd-iso",
                        slots=2)
    with runtime.engine.begin() as conn:
        pilots_db.add_pilots(conn, [{"pilot_id": "sd-iso", "site": "DIRAC.Local.ch", "ce": "localhost",
                                     "queue": "default", "backend": "local", "state": "Submitted",
                                     "submitted": now, "vo": "lhcb"}])
        token = tokens_service.store_token(conn, identity, now, lifetime=timedelta(hours=1))
    pilot = Caller(client, token)
    note = "user namespaces are not available on this node: unshare: Operation not permitted"
    answer = pilot.post(RENEW, {"pilot_id": "sd-iso", "slots": 2, "isolation": "none", "isolation_note": note})
    assert answer.status_code == 200, answer.text
    with runtime.engine.connect() as conn:
        row = pilots_db.get_pilot(conn, "sd-iso")
    assert (row["isolation"], row["isolation_note"], row["state"]) == ("none", note, "Running")
    admin = Caller(client, tokens["admin"])
    [view] = [p for p in admin.get("/pilots").json() if p["PilotID"] == "sd-iso"]
    assert (view["Isolation"], view["IsolationNote"], view["Warning"]) == (
        "none", note, f"runs payloads without isolation: {note}")
    # The SiteDirector gave the token the queue's slots per pilot: a stolen token cannot declare more.
    response = pilot.post(RENEW, {"slots": 3})
    assert response.status_code == 403 and response.json()["detail"] == (
        "pilot sd-iso declared 2 slots; it cannot take 3 now")
    assert pilot.post(RENEW, {"isolation": "apptainer"}).status_code == 200
    with runtime.engine.connect() as conn:
        row = pilots_db.get_pilot(conn, "sd-iso")
    assert (row["isolation"], row["isolation_note"]) == ("apptainer", None)
    assert token_row(runtime, token)["isolation"] == "apptainer"
    # An ended pilot runs nothing: no warning.
    assert pilot.post(RENEW, {"isolation": "none"}).status_code == 200
    with runtime.engine.begin() as conn:
        pilots_db.set_state(conn, "sd-iso", "Done", now)
    [view] = [p for p in admin.get("/pilots").json() if p["PilotID"] == "sd-iso"]
    assert (view["Isolation"], view["Warning"]) == ("none", "")


@pytest.mark.parametrize("body, where", [
    ({"slots": 0}, "slots"), ({"slots": "4"}, "slots"), ({"slots": 4.0}, "slots"), ({"slots": True}, "slots"),
    ({"isolation": "chroot"}, "isolation"), ({"isolation": "none", "isolation_note": "two\nlines"}, "isolation_note"),
    ({"isolation": "none", "isolation_note": "x" * 201}, "isolation_note"),
    ({"isolation": "none", "isolation_note": "bell\x07"}, "isolation_note"),
    ({"isolation": "none", "isolation_note": ""}, "isolation_note"),
    ({"cores": 4}, "cores"),
])
def test_a_malformed_declaration_is_refused_and_changes_nothing(runtime, hand_pilot, body, where):
    pilot, token = hand_pilot()
    before = token_row(runtime, token)
    response = pilot.post(RENEW, {"pilot_id": "hand-bad", **body})
    assert response.status_code == 422, response.text
    assert where in response.text
    assert token_row(runtime, token) == before


def test_a_note_without_isolation_is_refused(runtime, hand_pilot):
    pilot, token = hand_pilot()
    response = pilot.post(RENEW, {"isolation_note": "why"})
    assert response.status_code == 400 and response.json()["detail"] == "isolation_note goes with isolation"
    assert token_row(runtime, token)["isolation_note"] is None


def test_a_request_past_the_declared_slots_gets_no_job(runtime, client, hand_pilot, tokens):
    roland = Caller(client, tokens["roland"])
    job_ids = submit(roland, *[HELLO] * 4)
    pilot, token = hand_pilot()
    assert pilot.post(RENEW, {"pilot_id": "hand-2", "slots": 2}).status_code == 200
    got = [request(pilot, "hand-2").json() for _ in range(3)]
    assert [a["match"] for a in got] == [True, True, False]
    assert got[2]["reason"].startswith("pilot hand-2 holds 2 of its 2 declared slots")
    assert held_slots(runtime, "hand-2") == 2
    # A batch gets nothing either, and says why.
    answer = pilot.post("/matcher/request-jobs", {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default",
                                                  "host": "wn01", "pilot_id": "hand-2", "slots": 2, "count": 2,
                                                  "platform": "x86_64-el9", "cpu_time_left": 100000}).json()
    assert answer["jobs"] == [] and answer["reason"].startswith("pilot hand-2 holds 2 of its 2 declared slots")
    # A job that ends gives its slot back, as its other debits.
    first = got[0]["job"]
    assert pilot.post(f"/jobs/{first['JobID']}/pilot-status", {"pilot_id": "hand-2", "status": "Done",
                                                                "exit_code": 0, "attempt": first["Attempt"]}
                      ).status_code == 200
    assert held_slots(runtime, "hand-2") == 1
    assert request(pilot, "hand-2").json()["match"] is True
    with runtime.engine.connect() as conn:
        statuses = dict(conn.execute(select(schema.jobs.c.job_id, schema.jobs.c.status)
                                     .where(schema.jobs.c.job_id.in_(job_ids))).all())
    assert sorted(statuses.values()) == ["Done", "Matched", "Matched", "Waiting"]
    # Lowering the declaration holds at once in this server: 2 held, 1 declared.
    assert pilot.post(RENEW, {"slots": 1}).status_code == 200
    assert request(pilot, "hand-2").json()["reason"].startswith("pilot hand-2 holds 2 of its 1 declared slots")


def test_operators_and_undeclared_pilots_keep_todays_behaviour(runtime, client, hand_pilot, tokens):
    roland = Caller(client, tokens["roland"])
    submit(roland, *[HELLO] * 3)
    pilot, _ = hand_pilot()
    assert [request(pilot, "hand-old").json()["match"] for _ in range(2)] == [True, True]
    assert request(Caller(client, tokens["admin"]), "anyone").json()["match"] is True
    assert held_slots(runtime, "hand-old") is None and held_slots(runtime, "anyone") is None


def test_the_usage_rows_of_ended_pilots_are_cleaned(runtime, client, hand_pilot, tokens, now):
    from wms.services.pools import clean_submit_pools
    from wms.services.tokens import revoke_token, token_id

    submit(Caller(client, tokens["roland"]), HELLO)
    busy, busy_token = hand_pilot()
    idle, idle_token = hand_pilot()
    alive, _ = hand_pilot()
    for pilot, pilot_id in ((busy, "p-busy"), (idle, "p-idle"), (alive, "p-alive")):
        assert pilot.post(RENEW, {"pilot_id": pilot_id, "slots": 1}).status_code == 200
    assert request(busy, "p-busy").json()["match"] is True
    for token in (busy_token, idle_token):
        revoke_token(runtime.engine, token_id(token_hash(token)), now)
    report = clean_submit_pools(runtime, datetime.now(timezone.utc))
    assert report["pilot_rows_removed"] == 1
    # The idle ended pilot's row went; the one still holding a job, and the live one, stay.
    assert (held_slots(runtime, "p-idle"), held_slots(runtime, "p-busy"), held_slots(runtime, "p-alive")) == (
        None, 1, 0)


def test_a_token_that_declared_before_it_was_bound_is_capped_once_bound(runtime, client, hand_pilot, tokens):
    submit(Caller(client, tokens["roland"]), *[HELLO] * 3)
    pilot, token = hand_pilot()
    assert pilot.post(RENEW, {"slots": 1}).json()["PilotID"] is None
    response = pilot.post(RENEW, {"slots": 2})
    assert response.status_code == 403 and response.json()["detail"] == (
        f"pilot of token {tokens_service.token_id(token_hash(token))} declared 1 slots; it cannot take 2 now")
    assert [request(pilot, "hand-late").json()["match"] for _ in range(2)] == [True, False]
    assert held_slots(runtime, "hand-late") == 1
