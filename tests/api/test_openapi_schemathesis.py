"""The OpenAPI document against a real `wms server`, on SQLite and PostgreSQL.

One server per database, filled first by a tour that calls every route with
real objects (jobs, a pool, a matched job with its reports and output, a
reservation, a pilot); every answer of the tour must match its documented
model exactly (no field the model does not name). Then schemathesis, the
command a user would run, generates requests for every operation from
/openapi.json with the token of each role (user, pilot, operator, manager)
and checks that no answer is a server error and that every status, header and
body is the documented one. `make test` runs a few examples per operation
with a fixed seed; `make fuzz` many more with a new seed each time.
"""

from __future__ import annotations

import hashlib

import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from sqlalchemy import Engine

from tests.conftest import fuzz_examples
from tests.helpers import REPO, patience
from tests.servers import ServerHandle, edited_config, running_server
from wms.db import pilots as pilots_db
from wms.core.identity import Identity
from wms.db.engine import make_engine
from wms.services.retry import run_in_transaction
from wms.services.tokens import create_token


BACKENDS = ("sqlite", "postgresql")
ROLES = {
    "user": ("roland", "lhcb_user", "lhcb", "user"),
    "pilot": ("pilot", "lhcb_pilot", "lhcb", "pilot"),
    "operator": ("oper", "lhcb_prod", "lhcb", "operator"),
    "manager": ("admin", "lhcb_prod", "lhcb", "manager"),
    # the tour's own pilot: the schemathesis run binds "pilot" to random pilot ids
    "tour-pilot": ("pilot", "lhcb_pilot", "lhcb", "pilot"),
}
EXAMPLES = fuzz_examples(5)
FUZZ = os.environ.get("WMS_HYPOTHESIS_PROFILE") == "fuzz"
RUN_SECONDS = 3600 if FUZZ else 300     # one schemathesis run, before patience
pytestmark = pytest.mark.timeout(RUN_SECONDS * 2)
# A fixed seed in the suite (a failure is replayed by the same run); `make fuzz` a new one.
SEED = os.environ.get("WMS_SCHEMATHESIS_SEED") or ("" if FUZZ else "20261125")
CHECKS = ",".join([
    "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_headers_conformance",
    "response_schema_conformance", "negative_data_rejection", "ignored_auth", "missing_required_header",
    "unsupported_method",
])
EXAMPLES_DIR = REPO / "examples"


def phases(role: str) -> str:
    """The coverage phase (boundary values of every parameter, about 1,300 requests) for the
    manager, whom every route admits; the other roles fuzz only, to keep the suite fast.
    `make fuzz` runs every phase for every role."""
    if role == "manager" or FUZZ:
        return "examples,coverage,fuzzing"
    return "examples,fuzzing"


@dataclass
class Api:
    backend: str
    server: ServerHandle
    tokens: dict[str, str]
    document: dict[str, Any]
    tour: list[tuple[str, str, httpx.Response]]   # (method, documented path, answer)


def strict(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with every response model closed: a field it does not name fails validation."""
    closed = copy.deepcopy(document)
    for schema in closed["components"]["schemas"].values():
        if schema.get("additionalProperties") is True and "properties" in schema:
            schema["additionalProperties"] = False
    return closed


@contextmanager
def database(server: ServerHandle) -> Iterator[Engine]:
    """An engine on the server's database."""
    engine = make_engine(server.env["WMS_DATABASE_URL"])
    try:
        yield engine
    finally:
        engine.dispose()


def take_tour(server: ServerHandle, tokens: dict[str, str]) -> list[tuple[str, str, httpx.Response]]:
    """Every route called once or more with objects that exist; the answers, by documented path."""
    answers: list[tuple[str, str, httpx.Response]] = []
    clients = {role: server.api(token) for role, token in tokens.items()}

    def call(role: str, method: str, template: str, path: str | None = None, **kw: Any) -> httpx.Response:
        response = clients[role].request(method, path or template, **kw)
        assert response.status_code < 300, f"{method} {path or template} as {role}: {response.status_code} {response.text}"
        answers.append((method, "/api/v1" + template, response))
        return response

    # the hello job with an input file uploaded before and an output file the pilot sends back
    hello = (EXAMPLES_DIR / "hello.jdl").read_text().replace(
        'JobName = "hello";', 'JobName = "hello"; InputSandbox = {"data.txt"}; OutputSandbox = {"out.txt"};')
    software = (EXAMPLES_DIR / "software.jdl").read_text()
    data = b"tour data\n"
    digest = hashlib.sha256(data).hexdigest()
    call("user", "GET", "/sandboxes/limits")
    call("user", "PUT", "/sandboxes/{sha256}", f"/sandboxes/{digest}", content=data,
         headers={"Content-Type": "application/octet-stream"})
    ids = call("user", "POST", "/jobs", json={"jdls": [
        {"source": "hello.jdl", "text": hello, "input_sandbox": {"data.txt": digest}},
        {"source": "software.jdl", "text": software}]}).json()["job_ids"]
    call("user", "GET", "/whoami")
    call("user", "GET", "/overview")
    first, second = ids
    call("user", "GET", "/jobs")
    call("user", "GET", "/jobs", params={"job_id": ids})
    for suffix in ("", "/history", "/jdl", "/match-queues", "/why"):
        call("user", "GET", "/jobs/{job_id}" + suffix, f"/jobs/{second}{suffix}")
    call("user", "POST", "/match-queues", json={"source": "software.jdl", "text": software})
    pools = call("user", "GET", "/pools").json()
    assert pools, "the software job makes a SubmitPool"
    call("user", "GET", "/pools/{pool_id}", f"/pools/{pools[0]['SubmitPool']}")
    call("user", "GET", "/task-queues")
    call("user", "GET", "/queues")
    call("user", "GET", "/complexes")
    call("tour-pilot", "GET", "/matcher/submit-pools",
         params={"site": "LCG.CERN.ch", "ce": "ce02.cern.ch", "queue": "arm"})      # in the software job's pool

    # a rule set, so that the running job below shows in qquota
    call("manager", "POST", "/rqs", json={"text": "{\n name tour\n enabled true\n limit users * to slots=5\n}\n"})
    # a pilot takes the hello job, runs it, reports and uploads its output
    request = {"site": "LCG.CERN.ch", "ce": "ce01.cern.ch", "queue": "long", "host": "durin", "pilot_id": "tour-1"}
    matched = call("tour-pilot", "POST", "/matcher/request-job", json=request).json()
    assert matched["match"] is True, matched
    job = matched["job"]
    report = {"pilot_id": "tour-1", "attempt": job["Attempt"]}
    job_path = f"/jobs/{job['JobID']}"
    call("tour-pilot", "POST", "/jobs/{job_id}/pilot-status", f"{job_path}/pilot-status",
         json={**report, "status": "Running"})
    call("tour-pilot", "POST", "/jobs/{job_id}/heartbeat", f"{job_path}/heartbeat", json=report)
    # the payload, with the job token of this hand-out, reads its job and says how far it is
    clients["job"] = server.api(job["JobToken"])
    call("job", "GET", "/jobs/{job_id}", job_path)
    call("job", "POST", "/jobs/{job_id}/application-status", f"{job_path}/application-status",
         json={"application_status": "Reconstructing event 500"})
    held = {"pilot_id": "tour-1", "attempt": job["Attempt"]}
    call("tour-pilot", "GET", "/jobs/{job_id}/sandbox", f"{job_path}/sandbox", params=held)
    call("tour-pilot", "GET", "/jobs/{job_id}/sandbox/{kind}/{name}", f"{job_path}/sandbox/input/data.txt",
         params=held)
    out = b"tour output\n"
    call("tour-pilot", "PUT", "/jobs/{job_id}/sandbox/output/{name}", f"{job_path}/sandbox/output/out.txt",
         params=held, content=out, headers={"Content-Type": "application/octet-stream",
                                            "X-Content-SHA256": hashlib.sha256(out).hexdigest()})
    call("user", "GET", "/jobs/{job_id}/sandbox", f"{job_path}/sandbox")
    call("user", "GET", "/quotas")
    call("manager", "GET", "/quotas", params={"users": "*"})
    call("tour-pilot", "POST", "/jobs/{job_id}/output", f"{job_path}/output",
         json={**report, "stdout": "hello\n", "stderr": ""})
    call("tour-pilot", "POST", "/jobs/{job_id}/pilot-status", f"{job_path}/pilot-status",
         json={**report, "status": "Done", "exit_code": 0})
    call("user", "GET", "/jobs/{job_id}/output", f"{job_path}/output")
    call("user", "GET", "/jobs/{job_id}", job_path)           # a job with its queue and site
    call("tour-pilot", "POST", "/pilots/token/renew", json={})
    # no match: the other job needs what ce01/long does not offer
    no_match = call("tour-pilot", "POST", "/matcher/request-job", json=request).json()
    assert no_match["match"] is False, no_match
    # a two-slot pilot asks for two jobs at once: one more hello job, then the same no-match
    call("user", "POST", "/jobs", json={"jdls": [{"source": "hello.jdl", "text": (EXAMPLES_DIR / "hello.jdl").read_text()}]})
    batch = call("tour-pilot", "POST", "/matcher/request-jobs", json={**request, "slots": 2, "count": 2}).json()
    assert len(batch["jobs"]) == 1 and batch["reason"], batch
    # ... and reports its slots' jobs in one call each time: Running, then Done with the output
    slot = {"job_id": batch["jobs"][0]["JobID"], "pilot_id": "tour-1", "attempt": batch["jobs"][0]["Attempt"]}
    call("tour-pilot", "POST", "/jobs/pilot-status", json={"reports": [{**slot, "status": "Running"}]})
    call("tour-pilot", "POST", "/jobs/pilot-status", json={"reports": [
        {**slot, "status": "Done", "exit_code": 0, "output": {"stdout": "hello\n", "stderr": ""}}]})

    # a pilot as the SiteDirector records it
    with database(server) as engine:
        run_in_transaction(engine, lambda conn: pilots_db.add_pilots(conn, [{
            "pilot_id": "sd-tour", "site": "LCG.CERN.ch", "ce": "ce01.cern.ch", "queue": "long", "backend": "local",
            "backend_ref": "node:1:sd-tour", "state": "Submitted", "submitted": datetime.now(timezone.utc)}]))
    call("manager", "GET", "/pilots")
    (server.tmp / "pilot-logs" / "sd-tour.log").write_text("pilot sd-tour: started\n")
    call("manager", "GET", "/pilots/{pilot_id}/output", "/pilots/sd-tour/output")

    # reservations, accounting, quotas
    start = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0)
    granted = call("manager", "POST", "/reservations",
                   json={"start": start.isoformat(), "duration": "1:00:00", "name": "tour",
                         "resources": {"compiler_lic": 1}}).json()
    call("manager", "POST", "/reservations", json={"duration": "1:00:00", "verify": True})
    call("manager", "GET", "/reservations")
    call("manager", "PATCH", "/reservations/{ar_id}", f"/reservations/{granted['ar_id']}", json={"name": "tour2"})
    call("manager", "GET", "/accounting/reservations")
    call("manager", "GET", "/accounting/jobs")
    call("manager", "GET", "/rqs")
    call("manager", "GET", "/rqs/names")
    call("manager", "GET", "/rqs/template")
    call("manager", "PUT", "/rqs", json={"text": "{\n name tour\n enabled true\n limit users * to slots=4\n}\n",
                                         "name": "tour"})
    call("manager", "POST", "/rqs/attributes",
         json={"switch": "mattr", "attribute": "enabled", "value": "true", "target": "tour"})
    call("manager", "DELETE", "/rqs", params={"names": "tour"})
    call("manager", "PUT", "/complexes", json={"text": clients["manager"].get("/complexes").json()["text"]})
    call("manager", "POST", "/reservations/delete", json={"selectors": [str(granted["ar_id"])]})
    # the job controls on the job that waits: held, altered, released; killed, run again, deleted
    call("user", "POST", "/jobs/hold", json={"job_ids": [second], "reason": "tour"})
    call("user", "POST", "/jobs/alter", json={"job_ids": [second], "priority": 1, "job_name": "toured"})
    call("user", "POST", "/jobs/release", json={"job_ids": [second]})
    call("user", "POST", "/jobs/kill", json={"job_ids": [second]})
    call("user", "POST", "/jobs/reschedule", json={"job_ids": [second], "reason": "tour"})
    call("user", "DELETE", "/jobs/{job_id}", f"/jobs/{second}")
    call("user", "POST", "/jobs/delete", json={"job_ids": [second]})
    answers.append(("GET", "/api/v1/health", httpx.get(server.url + "/api/v1/health", timeout=patience(30))))
    answers.append(("GET", "/api/v1/auth/issuers", httpx.get(server.url + "/api/v1/auth/issuers",
                                                             timeout=patience(30))))
    for client in clients.values():
        client.close()
    return answers


@pytest.fixture(scope="module", params=BACKENDS)
def api(request, tmp_path_factory, database_factory) -> Iterator[Api]:
    backend = request.param
    tmp = tmp_path_factory.mktemp(f"openapi-{backend}")
    # the server's pilot logs in the test's directory (the route reads them from there)
    config = edited_config(tmp / "config", {"pilot_log_dir: var/pilots": f"pilot_log_dir: {tmp / 'server' / 'pilot-logs'}"})
    (tmp / "server" / "pilot-logs").mkdir(parents=True)
    # an identity provider, so that GET /auth/issuers answers a whole entry (it only reads the configuration)
    with (config / "wms.yaml").open("a") as wms_yaml:
        wms_yaml.write("\nidentity_providers:\n  - {issuer: 'https://iam.example.org/', vo: lhcb, "
                       "audience: 'https://wms.example.org', client_id: wms-cli, console_client_id: wms-console,\n"
                       "     mappings: [{idp_group: /lhcb, group: lhcb_user}]}\n")
    with running_server(tmp / "server", config_dir=config, database_url=database_factory(backend)) as server:
        # made in this process: five `wms admin token create` would cost more than the rest of the set-up
        with database(server) as engine:
            tokens = {role: create_token(engine, Identity(*spec), datetime.now(timezone.utc))
                      for role, spec in ROLES.items()}
        document = httpx.get(server.url + "/openapi.json", timeout=patience(30)).json()
        yield Api(backend, server, tokens, document, take_tour(server, tokens))


def test_every_route_is_in_the_tour(api):
    """The tour below checks real answers of every operation the document lists."""
    documented = {(method.upper(), path) for path, operations in api.document["paths"].items()
                  for method in operations}
    toured = {(method, path) for method, path, _ in api.tour}
    assert documented - toured == set()


def test_every_answer_of_the_tour_is_its_documented_model(api):
    schema = schemathesis.openapi.from_dict(strict(api.document))
    for method, path, response in api.tour:
        schema[path][method].validate_response(response)
    # and no model is checked on empty lists only
    lists = {(method.upper(), path) for path, operations in api.document["paths"].items()
             for method, operation in operations.items()
             if operation["responses"].get("200", {}).get("content", {}).get("application/json", {})
             .get("schema", {}).get("type") == "array"}
    filled = {(method, path) for method, path, response in api.tour if (method, path) in lists and response.json()}
    assert lists - filled == set()


@pytest.mark.parametrize("role", ["user", "pilot", "operator", "manager"])
def test_generated_requests_get_no_server_error_and_documented_answers(api, role, tmp_path):
    """schemathesis over every operation with this role's token: 0 failures of any check."""
    command = [
        str(Path(sys.executable).parent / "schemathesis"), "run", f"{api.server.url}/openapi.json",
        "--header", f"Authorization: Bearer {api.tokens[role]}", "--checks", CHECKS,
        "--max-examples", str(EXAMPLES), "--workers", "1", "--generation-database", "none",
        "--phases", phases(role), "--no-color", "--request-timeout", str(patience(30)),
        "--report", "junit", "--report-junit-path", str(tmp_path / "junit.xml"),
    ] + (["--seed", SEED] if SEED else [])
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=patience(RUN_SECONDS))
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"schemathesis as {role} on {api.backend}:\n{output[-20000:]}\n" + \
        api.server.log.read_text()[-5000:]
    cases = re.search(r"(\d+) generated", output)
    assert cases is not None and int(cases.group(1)) > 0, output[-3000:]
    operations = re.search(r"Tested: (\d+)", output)
    seed = re.search(r"Seed: (\d+)", output)
    print(f"{api.backend} {role}: {cases.group(0)}, {operations.group(1) if operations else '?'} operations, "
          f"seed {seed.group(1) if seed else '?'}")
