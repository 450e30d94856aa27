"""/api/v1/reservations: status codes of qrsub's outcomes and the access policy."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

pytestmark = pytest.mark.databases


def later(hours: int) -> str:
    return (datetime.now(timezone.utc) + timedelta(days=1, hours=hours)).replace(microsecond=0).isoformat()


def test_grant_list_and_refusals(as_user):
    admin = as_user("admin")
    granted = admin.post("/reservations", {"start": later(1), "duration": "1:0:0", "queues": ["long"]})
    assert granted.status_code == 201
    assert [r["ar_id"] for r in admin.get("/reservations").json()] == [granted.json()["ar_id"]]
    # roland is not in arusers: 403; a naive time: 422; the window dissonant: 400.
    assert as_user("roland").post("/reservations", {"duration": "1:0:0"}).status_code == 403
    naive = admin.post("/reservations", {"start": "2030-12-14T12:00:00", "duration": "1:0:0"})
    assert naive.status_code == 422 and "must carry its zone" in naive.json()["detail"]
    dissonant = admin.post("/reservations", {"start": later(1), "end": later(2), "duration": "2:0:0"})
    assert dissonant.status_code == 400 and "disagree" in dissonant.json()["detail"]
    # long has 100 slots: 101 in one queue cannot be granted (409).
    too_big = admin.post("/reservations", {"start": later(1), "duration": "1:0:0", "queues": ["long"],
                                           "allocation": "$pe_slots", "pe_slots": "101"})
    assert too_big.status_code == 409 and too_big.json()["detail"].startswith("denied: Reservation can't be granted")
    assert as_user("pilot").get("/reservations").status_code == 403
