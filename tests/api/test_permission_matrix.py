"""The permission matrix (wms/api/permissions.py) against a real `wms server`
on SQLite and PostgreSQL: every route of the app's own route table, sent by
every kind of caller, answers as the table says; an object the caller may
not see answers exactly as a missing one; docs/security.md shows the same
table."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import CONFIG_DIR, REPO, default_config, patience
from tests.oidc import AUDIENCE, PEOPLE, config_with_oidc, running_provider
from tests.servers import ServerHandle, running_server
from wms.api.app import API_PREFIX as API, create_app
from wms.api.permissions import CALLERS, EXPECTED, HIDDEN, OK, api_routes, with_matrix
from wms.core.identity import Identity
from wms.db import pilots as pilots_db
from wms.db.engine import make_engine
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

LOCAL = {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default"}
# Jobs that pilots on the local queue take, and jobs they never take (CERN only),
# so that a pilot's request in the matrix takes none of the jobs it needs.
RUNNABLE = '[ Executable = "/bin/echo"; Arguments = "hello"; CPUTime = 300; ]'
CERN_ONLY = '[ Executable = "/bin/echo"; Site = {"LCG.CERN.ch"}; CPUTime = 300; Requirements = [ Memory = 2000; ]; ]'
MISSING_JOB = 999_999_999
MISSING_AR = 99_999
MISSING_POOL = "0123456789abcdef"
IDENTITIES = {
    "owner": Identity(user="roland", group="lhcb_user", vo="lhcb", role="user"),
    "same_vo": Identity(user="alice", group="lhcb_user", vo="lhcb", role="user"),
    "other_vo": Identity(user="andre", group="dteam_user", vo="dteam", role="user"),
    "pilot": Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot", pilot_id="matrix-other"),
    "own_pilot": Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot", pilot_id="matrix-own"),
    "operator": Identity(user="oper", group="lhcb_prod", vo="lhcb", role="operator"),
    "manager": Identity(user="admin", group="lhcb_prod", vo="lhcb", role="manager"),
}
ADMIN_PILOT = "matrix-admin"             # the pilot operators and managers speak for when they ask for a job
DIRECTOR_PILOT = "matrix-sd"             # a SiteDirector pilot, with a log


@dataclass
class World:
    """The server, a client per caller, and roland's objects."""

    server: ServerHandle
    clients: dict[str, httpx.Client]
    held: int = 0                  # roland's job, given to the own pilot and Running, with output
    attempt: int = 0
    job_tokens: dict[int, str] = field(default_factory=dict)    # the JobToken of each hand-out, by job id
    waiting: int = 0               # roland's job that waits (CERN only): its task queue, why
    finished: int = 0              # roland's killed job: job accounting
    task_queue: int = 0
    pool: str = ""
    ar_id: int = 0                 # roland's advance reservation
    extra: dict[str, Any] = field(default_factory=dict)

    def as_(self, caller: str) -> httpx.Client:
        return self.clients[caller]

    def ok(self, caller: str, method: str, path: str, body: Any = None, **params: Any) -> Any:
        response = self.as_(caller).request(method, API + path, json=body, params=params or None)
        assert response.is_success, f"{caller}: {method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    def submit(self, text: str, caller: str = "owner") -> int:
        return self.ok(caller, "POST", "/jobs", {"jdls": [{"source": "matrix.jdl", "text": text}]})["job_ids"][0]

    def hand_out(self) -> tuple[int, int]:
        """A new job of roland's, given to the own pilot: (job id, attempt)."""
        job_id = self.submit(RUNNABLE)
        answer = self.ok("own_pilot", "POST", "/matcher/request-job", request_body("matrix-own"))
        assert answer["match"] and answer["job"]["JobID"] == job_id, answer
        self.job_tokens[job_id] = answer["job"]["JobToken"]
        return job_id, answer["job"]["Attempt"]

    def pilot_reports(self, job_id: int, attempt: int, status: str, **extra: Any) -> None:
        self.ok("own_pilot", "POST", f"/jobs/{job_id}/pilot-status",
                {"pilot_id": "matrix-own", "attempt": attempt, "status": status, **extra})

    def reservation(self, name: str = "") -> int:
        later = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()
        body = {"start": later, "duration": "1:0:0", "name": name, "resources": {"slots": 1}}
        return self.ok("owner", "POST", "/reservations", body)["ar_id"]


def request_body(pilot_id: str) -> dict[str, Any]:
    return {**LOCAL, "host": "wn01", "pilot_id": pilot_id, "platform": "x86_64-el9", "cpu_time_left": 100000}


def _config(tmp: Path) -> Path:
    """The repository's configuration; every user may reserve, pilot logs and sandboxes in ``tmp``, no settle wait."""
    config = tmp / "config-src"
    shutil.copytree(CONFIG_DIR, config)
    cluster = config / "cluster.yaml"
    text = cluster.read_text()
    assert "  arusers: [admin]" in text
    cluster.write_text(text.replace("  arusers: [admin]", "  arusers: [admin, roland, alice, andre]"))
    wms_yaml = config / "wms.yaml"
    text = wms_yaml.read_text()
    for old, new in (("pilot_log_dir: var/pilots", f"pilot_log_dir: {tmp / 'pilots'}"),
                     ("reservation_settle: 2", "reservation_settle: 0"),
                     ("  directory: var/sandboxes", f"  directory: {tmp / 'sandboxes'}")):
        assert old in text
        text = text.replace(old, new)
    wms_yaml.write_text(text)
    return config


# The callers who are people sign in with the VO's identity provider in the "oidc" variant:
# their access tokens come from a real OpenID provider (tests/oidc.py), whose groups map
# them to the same user, group, VO and role (tests/oidc.py, oidc_section). Pilots keep
# pilot tokens, as they do in a deployment.
PEOPLE_CALLERS = ("owner", "same_vo", "other_vo", "operator", "manager")


@pytest.fixture(scope="module", params=("sqlite", "postgresql", "sqlite-oidc"))
def world(request, tmp_path_factory, database_factory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp(f"matrix-{request.param}")
    url = database_factory(request.param.removesuffix("-oidc"))
    with ExitStack() as stack:
        config, provider = _config(tmp), None
        if request.param.endswith("-oidc"):
            provider = stack.enter_context(running_provider(tmp / "op", AUDIENCE, PEOPLE))
            config = config_with_oidc(tmp / "config-oidc", provider, source=config)
        server = stack.enter_context(running_server(tmp / "server", config_dir=config, database_url=url))
        engine = make_engine(url)
        now = datetime.now(timezone.utc)
        tokens = {name: create_token(engine, identity, now) for name, identity in IDENTITIES.items()}
        if provider is not None:
            for name in PEOPLE_CALLERS:
                tokens[name] = provider.tokens_for(IDENTITIES[name].user)["access_token"]
        tokens["expired"] = create_token(engine, IDENTITIES["owner"], now - timedelta(days=2),
                                         lifetime=timedelta(days=1))
        tokens["forged"] = "wms_" + secrets.token_hex(32)
        with engine.begin() as conn:
            pilots_db.add_pilots(conn, [{"pilot_id": DIRECTOR_PILOT, **LOCAL, "backend": "local", "state": "Running",
                                         "backend_ref": f"node:1:{DIRECTOR_PILOT}", "submitted": now}])
        (tmp / "pilots").mkdir()
        (tmp / "pilots" / f"{DIRECTOR_PILOT}.log").write_text("pilot started\n")
        engine.dispose()
        clients = {name: httpx.Client(base_url=server.url, timeout=patience(60),
                                      headers={"Authorization": f"Bearer {token}"}) for name, token in tokens.items()}
        clients["none"] = httpx.Client(base_url=server.url, timeout=patience(60))
        world = World(server, clients)
        try:
            _objects(world)
            for name, job_id in (("job", world.held), ("stale_job", world.extra["stale"])):
                clients[name] = httpx.Client(base_url=server.url, timeout=patience(60),
                                             headers={"Authorization": f"Bearer {world.job_tokens[job_id]}"})
            yield world
        finally:
            for client in clients.values():
                client.close()


def _objects(w: World) -> None:
    """Roland's job held by the own pilot and running (with output), one whose attempt
    is over (its job token stale), his waiting job, a finished one, a reservation."""
    stale, attempt = w.hand_out()
    w.pilot_reports(stale, attempt, "Done", exit_code=0)
    w.extra["stale"] = stale
    w.held, w.attempt = w.hand_out()
    w.pilot_reports(w.held, w.attempt, "Running", minor_status="Application")
    w.ok("own_pilot", "POST", f"/jobs/{w.held}/output",
         {"pilot_id": "matrix-own", "stdout": "hello\n", "attempt": w.attempt})
    _send(w, "own_pilot", _output_file(w, "own_pilot")).raise_for_status()
    w.waiting = w.submit(CERN_ONLY)
    status = w.ok("owner", "GET", f"/jobs/{w.waiting}")
    w.task_queue, w.pool = status["TaskQueue"], status["SubmitPool"]
    assert w.task_queue and w.pool, status
    w.finished = w.submit(CERN_ONLY)
    w.ok("manager", "POST", "/jobs/kill", {"job_ids": [w.finished]})
    w.ar_id = w.reservation("matrix")
    w.ok("manager", "POST", "/rqs", {"text": _rule_set("matrix_kept")})


# ---------------------------------------------------------------- how each route is called
@dataclass(frozen=True)
class Call:
    """One request: method, path (with ids), body, query; ``shows`` tells whether a list holds roland's object."""

    method: str
    path: str
    body: Any = None
    params: dict[str, Any] | None = None
    shows: Callable[[Any], bool] | None = None
    object_id: int | str | None = None              # the id of the object the request is about
    cleanup: Callable[[], Any] | None = None        # run after the request (frees what it took)
    missing: Call | None = None                     # the same request about an object that does not exist
    headers: dict[str, str] | None = None           # with a raw body (bytes): a file upload


def _ids(key: str, wanted: int) -> Callable[[Any], bool]:
    return lambda answer: any(item[key] == wanted for item in answer)


def about(object_id: Any, missing_id: Any, make: Callable[[Any], Call]) -> Call:
    """``make(id)`` about ``object_id``, with the same request about ``missing_id`` beside it."""
    return Call(**{**vars(make(object_id)), "object_id": object_id,
                   "missing": Call(**{**vars(make(missing_id)), "object_id": missing_id})})


def _job_route(suffix: str = "", job: str = "held") -> Callable[[World, str], Call]:
    def make(w: World, caller: str) -> Call:
        return about(getattr(w, job), MISSING_JOB, lambda i: Call("GET", API + f"/jobs/{i}{suffix}"))
    return make


def _kill(w: World, caller: str) -> Call:
    return about(w.submit(CERN_ONLY), MISSING_JOB, lambda i: Call("POST", API + "/jobs/kill", {"job_ids": [i]}))


def _hold(w: World, caller: str) -> Call:
    return about(w.submit(CERN_ONLY), MISSING_JOB, lambda i: Call("POST", API + "/jobs/hold", {"job_ids": [i]}))


def _release(w: World, caller: str) -> Call:
    job = w.submit(CERN_ONLY)
    w.ok("owner", "POST", "/jobs/hold", {"job_ids": [job], "reason": "to be released"})
    return about(job, MISSING_JOB, lambda i: Call("POST", API + "/jobs/release", {"job_ids": [i]}))


def _reschedule(w: World, caller: str) -> Call:
    job = w.submit(CERN_ONLY)
    w.ok("owner", "POST", "/jobs/kill", {"job_ids": [job]})
    return about(job, MISSING_JOB, lambda i: Call("POST", API + "/jobs/reschedule", {"job_ids": [i]}))


def _delete(w: World, caller: str) -> Call:
    return about(w.submit(CERN_ONLY), MISSING_JOB, lambda i: Call("POST", API + "/jobs/delete", {"job_ids": [i]}))


def _alter(w: World, caller: str) -> Call:
    return about(w.submit(CERN_ONLY), MISSING_JOB,
                 lambda i: Call("POST", API + "/jobs/alter", {"job_ids": [i], "priority": 3}))


def _kill_one(w: World, caller: str) -> Call:
    return about(w.submit(CERN_ONLY), MISSING_JOB, lambda i: Call("DELETE", API + f"/jobs/{i}"))


def _application_status(w: World, caller: str) -> Call:
    return about(w.held, MISSING_JOB, lambda i: Call(
        "POST", API + f"/jobs/{i}/application-status", {"application_status": f"set by the {caller}"}))


def _speaks_as(caller: str) -> str:
    """The pilot id a caller reports as: a pilot its own, operators and managers the own pilot's."""
    return "matrix-other" if caller == "pilot" else "matrix-own"


def _report(suffix: str, extra: dict[str, Any]) -> Callable[[World, str], Call]:
    def make(w: World, caller: str) -> Call:
        if suffix != "/pilot-status":
            body = {"pilot_id": _speaks_as(caller), "attempt": w.attempt, **extra}
            return about(w.held, MISSING_JOB, lambda i: Call("POST", API + f"/jobs/{i}{suffix}", body))
        # A status changes the job: a new one each time, ended by its pilot afterwards (its slot back).
        job_id, attempt = w.hand_out()
        body = {"pilot_id": _speaks_as(caller), "attempt": attempt, **extra}
        done = {"pilot_id": "matrix-own", "attempt": attempt, "status": "Done", "exit_code": 0}
        call = about(job_id, MISSING_JOB, lambda i: Call("POST", API + f"/jobs/{i}{suffix}", body))
        return Call(**{**vars(call), "cleanup": lambda: w.ok("own_pilot", "POST", f"/jobs/{job_id}{suffix}", done)})
    return make


def _reports(w: World, caller: str) -> Call:
    """A report in the call that carries several: a new job, ended by its pilot afterwards."""
    job_id, attempt = w.hand_out()
    body = {"reports": [{"job_id": job_id, "pilot_id": _speaks_as(caller), "attempt": attempt, "status": "Running"}]}
    done = {"pilot_id": "matrix-own", "attempt": attempt, "status": "Done", "exit_code": 0}
    # Another pilot's report is answered, refused inside as for a job that does not exist.
    return Call("POST", API + "/jobs/pilot-status", body, shows=lambda answer: "Error" not in answer["results"][0],
                cleanup=lambda: w.ok("own_pilot", "POST", f"/jobs/{job_id}/pilot-status", done))


SANDBOX_FILE = b"a file of the job's output sandbox\n"


def _output_file(w: World, caller: str) -> Call:
    """An output sandbox file of the held job, sent as a pilot sends it."""
    return about(w.held, MISSING_JOB, lambda i: Call(
        "PUT", API + f"/jobs/{i}/sandbox/output/matrix.txt", SANDBOX_FILE,
        params={"pilot_id": _speaks_as(caller), "attempt": w.attempt},
        headers={"X-Content-SHA256": hashlib.sha256(SANDBOX_FILE).hexdigest()}))


def _sandbox_read(suffix: str) -> Callable[[World, str], Call]:
    def make(w: World, caller: str) -> Call:
        return about(w.held, MISSING_JOB, lambda i: Call(
            "GET", API + f"/jobs/{i}/sandbox{suffix}", params={"pilot_id": _speaks_as(caller), "attempt": w.attempt}))
    return make


def _request_job(w: World, caller: str) -> Call:
    pilot_id = {"pilot": "matrix-other", "own_pilot": "matrix-own"}.get(caller, ADMIN_PILOT)
    return Call("POST", API + "/matcher/request-job", request_body(pilot_id))


def _request_jobs(w: World, caller: str) -> Call:
    pilot_id = {"pilot": "matrix-other", "own_pilot": "matrix-own"}.get(caller, ADMIN_PILOT)
    return Call("POST", API + "/matcher/request-jobs", {**request_body(pilot_id), "slots": 2, "count": 2})


def _renew(w: World, caller: str) -> Call:
    return Call("POST", API + "/pilots/token/renew", {"pilot_id": _speaks_as(caller)})


def _complexes(w: World, caller: str) -> Call:
    return Call("PUT", API + "/complexes", {"text": w.ok("manager", "GET", "/complexes")["text"]})


def _rule_set(name: str) -> str:
    return f"{{\n   name         {name}\n   enabled      false\n   limit        users * to slots=100\n}}\n"


def _delete_rqs(w: World, caller: str) -> Call:
    name = f"matrix_delete_{caller}"
    w.ok("manager", "POST", "/rqs", {"text": _rule_set(name)})
    return Call("DELETE", API + "/rqs", params={"names": name})


def _delete_reservation(w: World, caller: str) -> Call:
    return about(w.reservation(), MISSING_AR,
                 lambda i: Call("POST", API + "/reservations/delete", {"selectors": [str(i)]}))


def _alter_reservation(w: World, caller: str) -> Call:
    return about(w.ar_id, MISSING_AR, lambda i: Call("PATCH", API + f"/reservations/{i}", {"name": "matrix"}))


CALLS: dict[tuple[str, str], Callable[[World, str], Call]] = {
    ("GET", "/api/v1/health"): lambda w, c: Call("GET", API + "/health"),
    ("GET", "/metrics"): lambda w, c: Call("GET", "/metrics"),
    ("GET", "/api/v1/auth/issuers"): lambda w, c: Call("GET", API + "/auth/issuers"),
    ("POST", "/api/v1/jobs"): lambda w, c: Call("POST", API + "/jobs",
                                                {"jdls": [{"source": "matrix.jdl", "text": CERN_ONLY}]}),
    ("GET", "/api/v1/jobs"): lambda w, c: Call("GET", API + "/jobs", shows=_ids("JobID", w.held)),
    ("GET", "/api/v1/jobs/{job_id}"): _job_route(),
    ("GET", "/api/v1/jobs/{job_id}/jdl"): _job_route("/jdl"),
    ("GET", "/api/v1/jobs/{job_id}/history"): _job_route("/history"),
    ("GET", "/api/v1/jobs/{job_id}/output"): _job_route("/output"),
    ("GET", "/api/v1/jobs/{job_id}/why"): _job_route("/why"),
    ("GET", "/api/v1/jobs/{job_id}/match-queues"): _job_route("/match-queues", job="waiting"),
    ("POST", "/api/v1/jobs/kill"): _kill,
    ("POST", "/api/v1/jobs/hold"): _hold,
    ("POST", "/api/v1/jobs/release"): _release,
    ("POST", "/api/v1/jobs/reschedule"): _reschedule,
    ("POST", "/api/v1/jobs/delete"): _delete,
    ("POST", "/api/v1/jobs/alter"): _alter,
    ("DELETE", "/api/v1/jobs/{job_id}"): _kill_one,
    ("POST", "/api/v1/match-queues"): lambda w, c: Call("POST", API + "/match-queues", {"text": CERN_ONLY}),
    ("POST", "/api/v1/matcher/request-job"): _request_job,
    ("POST", "/api/v1/matcher/request-jobs"): _request_jobs,
    ("POST", "/api/v1/jobs/pilot-status"): _reports,
    ("POST", "/api/v1/jobs/{job_id}/pilot-status"): _report("/pilot-status", {"status": "Running"}),
    ("POST", "/api/v1/jobs/{job_id}/heartbeat"): _report("/heartbeat", {}),
    ("POST", "/api/v1/jobs/{job_id}/output"): _report("/output", {"stdout": "hello\n"}),
    ("POST", "/api/v1/jobs/{job_id}/application-status"): _application_status,
    ("GET", "/api/v1/matcher/submit-pools"): lambda w, c: Call("GET", API + "/matcher/submit-pools", params=LOCAL),
    ("GET", "/api/v1/pools"): lambda w, c: Call("GET", API + "/pools", shows=_ids("SubmitPool", w.pool)),
    ("GET", "/api/v1/pools/{pool_id}"): lambda w, c: about(w.pool, MISSING_POOL,
                                                           lambda i: Call("GET", API + f"/pools/{i}")),
    ("GET", "/api/v1/task-queues"): lambda w, c: Call("GET", API + "/task-queues",
                                                      shows=_ids("TaskQueue", w.task_queue)),
    ("GET", "/api/v1/queues"): lambda w, c: Call("GET", API + "/queues"),
    ("GET", "/api/v1/complexes"): lambda w, c: Call("GET", API + "/complexes"),
    ("PUT", "/api/v1/complexes"): _complexes,
    ("GET", "/api/v1/pilots"): lambda w, c: Call("GET", API + "/pilots"),
    ("POST", "/api/v1/pilots/token/renew"): _renew,
    ("GET", "/api/v1/pilots/{pilot_id}/output"): lambda w, c: Call("GET", API + f"/pilots/{DIRECTOR_PILOT}/output"),
    ("POST", "/api/v1/reservations"): lambda w, c: Call("POST", API + "/reservations", {
        "start": (datetime.now(timezone.utc) + timedelta(days=30)).isoformat(), "duration": "1:0:0",
        "resources": {"slots": 1}, "verify": True}),
    ("GET", "/api/v1/reservations"): lambda w, c: Call("GET", API + "/reservations", shows=_ids("ar_id", w.ar_id)),
    ("PATCH", "/api/v1/reservations/{ar_id}"): _alter_reservation,
    ("POST", "/api/v1/reservations/delete"): _delete_reservation,
    ("GET", "/api/v1/accounting/reservations"): lambda w, c: Call("GET", API + "/accounting/reservations",
                                                           shows=_ids("ar_id", w.ar_id)),
    ("GET", "/api/v1/accounting/jobs"): lambda w, c: Call("GET", API + "/accounting/jobs",
                                                          shows=_ids("JobID", w.finished)),
    ("GET", "/api/v1/rqs"): lambda w, c: Call("GET", API + "/rqs"),
    ("GET", "/api/v1/rqs/names"): lambda w, c: Call("GET", API + "/rqs/names"),
    ("GET", "/api/v1/rqs/template"): lambda w, c: Call("GET", API + "/rqs/template"),
    ("POST", "/api/v1/rqs"): lambda w, c: Call("POST", API + "/rqs", {"text": _rule_set(f"matrix_add_{c}")}),
    ("PUT", "/api/v1/rqs"): lambda w, c: Call("PUT", API + "/rqs",
                                              {"text": _rule_set("matrix_kept"), "name": "matrix_kept"}),
    ("DELETE", "/api/v1/rqs"): _delete_rqs,
    ("POST", "/api/v1/rqs/attributes"): lambda w, c: Call("POST", API + "/rqs/attributes", {
        "switch": "mattr", "attribute": "enabled", "value": "false", "target": "ruleset2"}),
    ("GET", "/api/v1/quotas"): lambda w, c: Call("GET", API + "/quotas", params={"users": "roland"}),
    ("GET", "/api/v1/sandboxes/limits"): lambda w, c: Call("GET", API + "/sandboxes/limits"),
    ("PUT", "/api/v1/sandboxes/{sha256}"): lambda w, c: Call(
        "PUT", API + f"/sandboxes/{hashlib.sha256(SANDBOX_FILE).hexdigest()}", SANDBOX_FILE),
    ("GET", "/api/v1/jobs/{job_id}/sandbox"): _sandbox_read(""),
    ("GET", "/api/v1/jobs/{job_id}/sandbox/{kind}/{name}"): _sandbox_read("/output/matrix.txt"),
    ("PUT", "/api/v1/jobs/{job_id}/sandbox/output/{name}"): _output_file,


    ("GET", "/api/v1/whoami"): lambda w, c: Call("GET", API + "/whoami"),
    ("GET", "/api/v1/overview"): lambda w, c: Call("GET", API + "/overview"),
}


def _outcome(response: httpx.Response, call: Call) -> str:
    if response.is_success:
        if call.shows is None:
            return OK
        return OK if call.shows(response.json()) else HIDDEN
    return str(response.status_code)


def _send(w: World, caller: str, call: Call) -> httpx.Response:
    if isinstance(call.body, bytes):           # a file, sent as the raw body
        return w.as_(caller).request(call.method, call.path, content=call.body, params=call.params,
                                     headers={"Content-Type": "application/octet-stream", **(call.headers or {})})
    return w.as_(caller).request(call.method, call.path, json=call.body, params=call.params)


def _alike(hidden: httpx.Response, missing: httpx.Response, hidden_id: Any, missing_id: Any) -> bool:
    """Same status and the same body, but for the id."""
    return (hidden.status_code == missing.status_code
            and _without_request_id(hidden) == _without_request_id(missing).replace(str(missing_id), str(hidden_id)))


def _without_request_id(response: httpx.Response) -> str:
    """The body as the caller reads it, less the id every answer carries for the logs."""
    try:
        body = response.json()
    except ValueError:
        return response.text
    if isinstance(body, dict):
        body.pop("request_id", None)
    return json.dumps(body, sort_keys=True)


# ---------------------------------------------------------------- the tests
def test_every_route_of_the_app_is_in_the_matrix():
    """A new route fails here until the table (and so docs/security.md) says who may call it."""
    routes = set(api_routes(create_app(Runtime.create(default_config(), make_engine("sqlite://")))))
    assert sorted(routes - set(EXPECTED)) == [], "routes missing from wms/api/permissions.py"
    assert sorted(set(EXPECTED) - routes) == [], "routes in wms/api/permissions.py that the app does not have"
    assert set(CALLS) == set(EXPECTED), "routes without a request in CALLS"


@pytest.mark.parametrize("route", sorted(EXPECTED), ids=lambda r: f"{r[0]} {r[1].removeprefix(API)}")
def test_each_caller_gets_what_the_matrix_says(world, route):
    method, path = route
    make = CALLS[(method, path)]
    got, unlike = {}, []
    for caller in CALLERS:
        call = make(world, caller)
        response = _send(world, caller, call)
        got[caller] = _outcome(response, call)
        if call.cleanup is not None:
            call.cleanup()
        assert response.status_code < 500, (caller, response.text)
        if got[caller] == "404" and call.missing is None:
            unlike.append((caller, response.text, "no request about a missing object to compare with"))
        elif got[caller] == "404" and call.missing is not None:
            # What the caller may not see answers as what does not exist.
            missing = _send(world, caller, call.missing)
            if not _alike(response, missing, call.object_id, call.missing.object_id):
                unlike.append((caller, response.text, missing.text))
    assert got == EXPECTED[route]
    assert unlike == []


def test_the_security_page_shows_the_matrix():
    page = (REPO / "docs" / "security.md").read_text()
    assert with_matrix(page) == page, "docs/security.md is stale: run python -m wms.api.permissions docs/security.md"
