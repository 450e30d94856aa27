"""A user's ClassAd expression that the library raises on (classad2's
ClassAdException, or a Python exception of its conversions) is a 400 with
its place and the library's reason, at submission and in match-queues,
with nothing stored; at match time it denies that task queue and the
pilot gets its normal answer."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from wms.db.schema import jobs, task_queues

pytestmark = pytest.mark.databases

LOCAL = {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default", "platform": "x86_64-el9",
         "cpu_time_left": 100000, "host": "wn01"}

# absTime of a string that classad2 reads as year -1: a ValueError in its conversion
ABSTIME = '[ Executable = "/bin/true";\n  Requirements = absTime("\\u0000"); ]'
# a string doubled past classad2's cap: ClassAdException("failed to evaluate expression")
DOUBLED = ('[ Executable = "/bin/true";\n  Requirements = [ a0 = "' + "x" * 64 + '"; '
           + " ".join(f"a{i} = strcat(a{i - 1}, a{i - 1});" for i in range(1, 23)) + ' ].a22 == ""; ]')


def rows(runtime) -> tuple[int, int]:
    with runtime.engine.connect() as conn:
        return (conn.execute(select(func.count()).select_from(jobs)).scalar_one(),
                conn.execute(select(func.count()).select_from(task_queues)).scalar_one())


@pytest.mark.parametrize("text, where, why", [
    (ABSTIME, "bad.jdl:2:3: cannot parse the value of Requirements", "year -1 is out of range"),
    (DOUBLED, "bad.jdl: Requirements: cannot evaluate [ a0 = ", "failed to evaluate expression"),
])
@pytest.mark.parametrize("route", ["/jobs", "/match-queues"])
def test_an_expression_the_library_raises_on_is_a_400_with_its_place(as_user, runtime, route, text, where, why):
    roland = as_user("roland")
    before = rows(runtime)
    body = ({"jdls": [{"source": "ok.jdl", "text": '[ Executable = "/bin/true"; ]'}, {"source": "bad.jdl", "text": text}]}
            if route == "/jobs" else {"source": "bad.jdl", "text": text})
    answer = roland.post(route, body)
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith(where) and detail.endswith(why), detail
    assert "\n" not in detail and len(detail) < 400     # one line; the huge input is not echoed
    assert rows(runtime) == before


def test_a_stored_expression_that_raises_on_a_pilot_holds_its_task_queue_only(as_user, runtime):
    roland, admin = as_user("roland"), as_user("admin")
    # Undefined on the queue's parameters (stored), random(0) raises on a one-slot pilot.
    raising = '[ Executable = "/bin/true"; Priority = 9; Requirements = random(other.FreeSlots - 1) >= 0; ]'
    answer = roland.post("/jobs", {"jdls": [{"source": "raising.jdl", "text": raising}]})
    assert answer.status_code == 201, answer.text
    [raising_id] = answer.json()["job_ids"]

    alone = admin.post("/matcher/request-job", {**LOCAL, "pilot_id": "p1", "slots": 1})
    assert alone.status_code == 200, alone.text
    assert alone.json().get("match") is False
    assert "Requirements expression cannot be evaluated on a pilot of DIRAC.Local.ch/localhost/default" in alone.text
    assert "failed to evaluate expression" in alone.text
    held = roland.get(f"/jobs/{raising_id}").json()
    assert held["Status"] == "Held"
    assert held["MinorStatus"].startswith("Held by the system: Requirements expression cannot be evaluated")

    answer = roland.post("/jobs", {"jdls": [{"source": "ok.jdl", "text": '[ Executable = "/bin/true"; ]'}]})
    [ok_id] = answer.json()["job_ids"]
    other = admin.post("/matcher/request-job", {**LOCAL, "pilot_id": "p2", "slots": 1})
    assert other.status_code == 200, other.text
    assert other.json().get("match") is True and other.json()["job"]["JobID"] == ok_id, other.text
    assert roland.get(f"/jobs/{raising_id}").json()["Status"] == "Held"
