"""The visibility policy (wms.yaml ``visibility:``, docs/security.md
"Permissions") beyond its defaults, over HTTP on SQLite, PostgreSQL and
MariaDB: who sees roland's job, task queue, reservation and quota usage
under each scope, and that what one may not see answers as a missing
object. The defaults are in the permission matrix (test_permission_matrix.py)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ADMIN, ALICE, ANDRE, ROLAND, default_config
from wms.api.app import create_app
from wms.config.models import VisibilitySettings
from wms.core.identity import Identity
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases

HELLO = '[ Executable = "/bin/echo"; CPUTime = 300; ]'
# Roland's VO, another group.
BOB = Identity(user="bob", group="lhcb_sgm", vo="lhcb", role="user")
PEOPLE = {"roland": ROLAND, "alice": ALICE, "bob": BOB, "andre": ANDRE, "admin": ADMIN}


@pytest.fixture
def callers(engine):
    """``callers(jobs="group", ...)``: a client per user of PEOPLE on a server with that visibility."""

    def make(**scopes: str) -> dict[str, Caller]:
        config = default_config()
        settings = config.settings.model_copy(update={"visibility": VisibilitySettings(**scopes)})
        runtime = Runtime.create(dataclasses.replace(config, settings=settings), engine)
        client = TestClient(create_app(runtime))
        now = datetime.now(timezone.utc)
        return {name: Caller(client, create_token(engine, who, now)) for name, who in PEOPLE.items()}

    return make


class Caller:
    def __init__(self, client: TestClient, token: str) -> None:
        self.client, self.headers = client, {"Authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, body=None, **params):
        return self.client.request(method, "/api/v1" + path, headers=self.headers, json=body, params=params or None)

    def ok(self, method: str, path: str, body=None, **params):
        response = self.call(method, path, body, **params)
        assert response.is_success, response.text
        return response.json()


def submit(caller: Caller) -> int:
    return caller.ok("POST", "/jobs", {"jdls": [{"source": "hello.jdl", "text": HELLO}]})["job_ids"][0]


@pytest.mark.parametrize("scope, sees", [
    ("owner", set()),
    ("group", {"alice"}),                     # roland's group, lhcb_user
    ("vo", {"alice", "bob"}),
    ("all", {"alice", "bob", "andre"}),
])
def test_who_sees_rolands_job(callers, scope, sees):
    people = callers(jobs=scope)
    job_id = submit(people["roland"])
    for name in ("alice", "bob", "andre"):
        caller = people[name]
        listed = [j["JobID"] for j in caller.ok("GET", "/jobs")]
        if name in sees:
            assert caller.ok("GET", f"/jobs/{job_id}")["Owner"] == "roland"
            assert "/bin/echo" in caller.ok("GET", f"/jobs/{job_id}/jdl")["OriginalJDL"]
            assert [e["Status"] for e in caller.ok("GET", f"/jobs/{job_id}/history")][-1] == "Waiting"
            assert listed == [job_id]
            assert [j["JobID"] for j in caller.ok("GET", "/jobs", owner="roland")] == [job_id]
            # Seeing is not changing: only the owner, operators and managers kill.
            response = caller.call("POST", "/jobs/kill", {"job_ids": [job_id]})
            assert response.status_code == 403 and response.json()["detail"] == f"you may not kill job {job_id}"
        else:
            for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/jdl", f"/jobs/{job_id}/history", f"/jobs/{job_id}/why"):
                hidden, missing = caller.call("GET", path), caller.call("GET", path.replace(str(job_id), "999999"))
                assert (hidden.status_code, hidden.json()) == (404, {"detail": f"no such job: {job_id}"})
                assert (missing.status_code, missing.json()) == (404, {"detail": "no such job: 999999"})
            assert listed == []
            assert caller.ok("GET", "/jobs", owner="roland") == []
    assert people["roland"].ok("GET", f"/jobs/{job_id}")["Status"] == "Waiting"        # nobody killed it


def test_finished_jobs_in_the_accounting_follow_the_job_scope(callers):
    people = callers(jobs="group")
    job_id = submit(people["roland"])
    people["roland"].ok("DELETE", f"/jobs/{job_id}")
    seen = {name: [r["JobID"] for r in people[name].ok("GET", "/accounting/jobs")] for name in ("alice", "bob")}
    assert seen == {"alice": [job_id], "bob": []}


@pytest.mark.parametrize("scope, sees", [
    ("owner", set()),
    ("group", {"alice"}),
    ("vo", {"alice", "bob"}),
    ("all", {"alice", "bob", "andre"}),
])
def test_who_sees_rolands_task_queue(callers, scope, sees):
    people = callers(task_queues=scope)
    job_id = submit(people["roland"])
    tq_id = people["roland"].ok("GET", f"/jobs/{job_id}")["TaskQueue"]
    for name in ("roland", "alice", "bob", "andre", "admin"):
        queues = {tq["TaskQueue"]: tq for tq in people[name].ok("GET", "/task-queues")}
        assert (tq_id in queues) == (name in sees | {"roland", "admin"}), name
        if tq_id in queues:
            assert queues[tq_id]["Owner"] == "roland" and queues[tq_id]["VO"] == "lhcb"


@pytest.mark.parametrize("scope, others_see", [("vo", False), ("owner", False), ("all", True)])
def test_a_pool_is_seen_by_its_vo(callers, scope, others_see):
    people = callers(task_queues=scope)
    job_id = submit_with_requirements(people["roland"])
    pool = people["roland"].ok("GET", f"/jobs/{job_id}")["SubmitPool"]
    for name in ("roland", "bob", "admin"):
        assert pool in {p["SubmitPool"] for p in people[name].ok("GET", "/pools")}, name
    andre = people["andre"]
    assert (pool in {p["SubmitPool"] for p in andre.ok("GET", "/pools")}) == others_see
    if not others_see:
        hidden, missing = andre.call("GET", f"/pools/{pool}"), andre.call("GET", "/pools/0123456789abcdef")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["detail"] == missing.json()["detail"].replace("0123456789abcdef", pool)


def submit_with_requirements(caller: Caller) -> int:
    text = '[ Executable = "/bin/echo"; CPUTime = 300; Requirements = [ Memory = 2000; ]; ]'
    return caller.ok("POST", "/jobs", {"jdls": [{"source": "memory.jdl", "text": text}]})["job_ids"][0]


def reserve(caller: Caller, name: str) -> int:
    later = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()
    return caller.ok("POST", "/reservations", {"start": later, "duration": "1:0:0", "name": name,
                                                "resources": {"slots": 1}})["ar_id"]


def test_reservations_of_others_hidden_when_configured(callers):
    people = callers(reservations="owner")
    admin, roland = people["admin"], people["roland"]
    ar_id = reserve(admin, "admins")                 # admin is in arusers
    assert [r["ar_id"] for r in admin.ok("GET", "/reservations")] == [ar_id]
    assert roland.ok("GET", "/reservations") == []
    assert roland.ok("GET", "/accounting/reservations") == []
    # Named, altered or deleted, it answers as one that does not exist.
    for method, path, body, params in (("GET", "/reservations", None, {"ar": str(ar_id)}),
                                       ("PATCH", f"/reservations/{ar_id}", {"name": "mine"}, {}),
                                       ("POST", "/reservations/delete", {"selectors": [str(ar_id)]}, {})):
        hidden = roland.call(method, path, body, **params)
        missing = roland.call(method, path.replace(str(ar_id), "9999"),
                              body and {k: (["9999"] if k == "selectors" else v) for k, v in body.items()},
                              **{k: "9999" for k in params})
        assert hidden.status_code == missing.status_code == 404, (path, hidden.text)
        assert hidden.json()["detail"] == missing.json()["detail"].replace("9999", str(ar_id))
    assert admin.ok("GET", "/reservations")[0]["name"] == "admins"       # unchanged, not deleted


def test_a_hidden_reservation_is_seen_by_its_access_list_and_unknown_to_submit_ar(callers):
    people = callers(reservations="owner")
    later = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()
    ar_id = people["admin"].ok("POST", "/reservations", {"start": later, "duration": "1:0:0", "resources": {"slots": 1},
                                                          "users": ["admin", "roland"]})["ar_id"]
    assert [r["ar_id"] for r in people["roland"].ok("GET", "/reservations")] == [ar_id]     # on its access list
    assert people["alice"].ok("GET", "/reservations") == []

    def submit_into(caller: Caller, reservation: int):
        return caller.call("POST", "/jobs", {"jdls": [{"source": "ar.jdl", "text": HELLO}], "reservation": reservation,
                                             "resource_requests": {"h_rt": "0:30:0"}})

    hidden, missing = submit_into(people["alice"], ar_id), submit_into(people["alice"], 9999)
    assert hidden.status_code == missing.status_code == 400
    assert hidden.json()["detail"] == missing.json()["detail"].replace("9999", str(ar_id))
    assert "does not exist" in hidden.json()["detail"]
    # Where reservations are seen by all, the same request says why it is refused.
    assert "has no access" in submit_into(callers()["alice"], ar_id).json()["detail"]


def test_reservations_of_others_shown_by_default_as_qrstat_does(callers):
    people = callers()
    ar_id = reserve(people["admin"], "admins")
    assert [r["ar_id"] for r in people["andre"].ok("GET", "/reservations")] == [ar_id]
    response = people["andre"].call("POST", "/reservations/delete", {"selectors": [str(ar_id)]})
    assert response.status_code == 403 and "not allowed to delete" in response.json()["detail"]


def test_quota_usage_of_others_refused_when_configured(callers):
    people = callers(quota_usage="owner")
    assert people["roland"].call("GET", "/quotas", users="roland").status_code == 200
    assert people["roland"].call("GET", "/quotas").status_code == 200
    response = people["roland"].call("GET", "/quotas", users="alice")
    assert response.status_code == 403
    assert response.json()["detail"] == ("users see only their own quota usage here (visibility.quota_usage is "
                                         "owner): ask for -u roland, or leave -u out")
    assert people["admin"].call("GET", "/quotas", users="alice").status_code == 200
    assert callers()["roland"].call("GET", "/quotas", users="alice").status_code == 200     # the default: all
