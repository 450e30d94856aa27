"""What the web console asks of /api/v1 besides the rest: who am I and what
may my role do (read from the routes' own policies), the overview's counts,
and the console's files under /ui."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.databases

HELLO = '[ Executable = "/bin/sh"; Arguments = "-c true"; CPUTime = 100; ]'
LOCAL = {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default", "platform": "x86_64-el9",
         "cpu_time_left": 100000}


def submit(caller, count: int) -> list[int]:
    response = caller.post("/jobs", {"jdls": [{"source": f"j{i}.jdl", "text": HELLO} for i in range(count)]})
    assert response.status_code == 201, response.text
    return response.json()["job_ids"]


@pytest.mark.parametrize("user, role, allowed, refused", [
    # roland is not in arusers: he may list reservations, not submit them
    ("roland", "user", ["POST /jobs", "POST /jobs/kill", "GET /reservations", "GET /quotas", "GET /overview"],
     ["POST /reservations", "GET /pilots", "PUT /rqs", "PUT /complexes"]),
    ("oper", "operator", ["GET /pilots", "PUT /rqs", "POST /rqs/attributes", "POST /reservations"],
     ["PUT /complexes"]),
    ("admin", "manager", ["GET /pilots", "PUT /rqs", "PUT /complexes", "POST /jobs/kill"], []),
    ("pilot", "pilot", ["GET /jobs/{job_id}/why"], ["POST /jobs", "GET /overview", "GET /pilots"]),
])
def test_whoami_names_the_caller_and_what_the_role_may_do(as_user, user, role, allowed, refused):
    me = as_user(user).get("/whoami").json()
    assert (me["User"], me["Role"]) == (user, role)
    assert [a for a in allowed if not me["Allowed"][a]] == []
    assert [a for a in refused if me["Allowed"][a]] == []


def test_whoami_without_a_token_is_refused(client):
    response = client.get("/api/v1/whoami")
    assert response.status_code == 401
    assert "bearer token" in response.json()["detail"]


def test_overview_counts_jobs_matches_pilots_and_full_queues(as_user):
    roland, admin = as_user("roland"), as_user("admin")
    submit(roland, 5)
    # The local queue has 4 slots: four matches fill it (an administrator may ask as any pilot).
    for n in range(4):
        answer = admin.post("/matcher/request-job", {**LOCAL, "host": "wn01", "pilot_id": f"p{n}"})
        assert answer.json().get("match") is True, answer.text
    submit(as_user("andre"), 1)  # another user's job, after the matches

    mine = roland.get("/overview").json()
    assert mine["Jobs"]["Matched"] == 4 and mine["Jobs"]["Waiting"] == 1
    assert mine["RecentMatches"] == 4
    assert mine["Pilots"] is None  # pilots are an administrator's view
    assert {"Kind": "queue", "Name": "DIRAC.Local.ch/localhost/default", "Full": ["slots"]} in mine["FullQueues"]

    everyone = admin.get("/overview").json()
    assert everyone["Jobs"]["Waiting"] == 2
    assert everyone["Pilots"] == {}


def test_overview_is_for_people_not_pilots(as_user):
    response = as_user("pilot").get("/overview")
    assert response.status_code == 403
    assert response.json()["detail"] == "role 'pilot' may not do this (needs user or operator or manager)"


def test_the_console_is_served_under_ui(client):
    assert client.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
    page = client.get("/ui/")
    assert page.status_code == 200 and "<title>" in page.text
    assert client.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/missing.js").status_code == 404
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_every_console_action_names_a_route(client):
    from wms.api.app import API_PREFIX
    from wms.api.policies import role_table
    from wms.api.routes_console import ACTIONS

    table = role_table(client.app, API_PREFIX)
    assert [a for a in ACTIONS if a not in table] == []


def test_jobs_of_one_pilot(as_user):
    roland, admin = as_user("roland"), as_user("admin")
    first, second, third = submit(roland, 3)
    for pilot_id in ("p1", "p1", "p2"):
        answer = admin.post("/matcher/request-job", {**LOCAL, "host": "wn01", "pilot_id": pilot_id})
        assert answer.json().get("match") is True, answer.text
    held = {pilot: [j["JobID"] for j in admin.get("/jobs", params={"pilot": pilot}).json()] for pilot in ("p1", "p2")}
    assert sorted(held["p1"] + held["p2"]) == [first, second, third] and len(held["p1"]) == 2
    assert roland.get("/jobs", params={"pilot": "p2"}).json()[0]["JobID"] == held["p2"][0]  # own jobs only
    assert admin.get("/jobs", params={"pilot": "nobody"}).json() == []


def test_a_pilot_token_lists_only_its_own_pilots_jobs(as_user):
    response = as_user("pilot").get("/jobs", params={"pilot": "someone-else"})
    assert response.status_code == 403
    assert response.json()["detail"] == "a pilot token lists only the jobs of its own pilot"
