"""Hostile requests against a real server on SQLite, PostgreSQL and MariaDB.

Every case is refused with a 4xx and the API's one-line error shape, the
server answers the next request on the same connection, and nothing of a
refused request is stored (rows in every table counted before and after).
The cases include every request that once answered 500 or killed the
server: nested records and lists, nested and unclosed parentheses, long
``&&`` chains (40,000 terms made classad2 exhaust the C stack), lone
surrogates and NUL in strings, job ids of 2**63 and more, and bodies too
large to read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import fuzz_examples
from tests.hostile.conftest import JDL_BYTES, Hostile

pytestmark = pytest.mark.timeout(600)


def jdl(body: str) -> str:
    return f'[\n  Executable = "/bin/true";\n{body}\n]'


def chain(n: int) -> str:
    return " && ".join(f"other.x{i % 7} > 1" for i in range(n))


def nested_records(n: int) -> str:
    return "[ a = " * n + "1" + " ]" * n


def nested_lists(n: int) -> str:
    return "{ " * n + '"a"' + " }" * n


BIG = 2**63  # one past the largest 64-bit id
HUGE = 10**20


@dataclass
class Case:
    name: str
    role: str | None
    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    expect: tuple[int, ...] = (400,)
    says: str = ""  # a part of the detail


def submit(text: str) -> dict[str, Any]:
    return {"jdls": [{"source": "x.jdl", "text": text}]}


def raw_json(text: str) -> bytes:
    """A JSON body written by hand (escapes a Python json.dumps would not make)."""
    return text.encode("utf-8", "surrogatepass")


CASES = [
    # nesting and long expressions: once 500s or a crash
    Case("records-4000", "roland", "POST", "/jobs", submit(jdl(f"  A = {nested_records(4000)};")), says="nested too deep"),
    Case("tags-lists-4000", "roland", "POST", "/jobs", submit(jdl(f"  Tags = {nested_lists(4000)};")), says="nested too deep"),
    Case("parentheses-8000", "roland", "POST", "/jobs",
         submit(jdl("  Requirements = " + "(" * 8000 + "other.x > 1" + ")" * 8000 + ";")), says="nested too deep"),
    Case("and-30000", "roland", "POST", "/jobs", submit(jdl(f"  Requirements = {chain(30000)};")),
         says="expression too long"),
    Case("and-40000-crash", "roland", "POST", "/jobs", submit(jdl(f"  Requirements = {chain(40000)};")),
         says="expression too long"),
    Case("and-40000-match-queues", "roland", "POST", "/match-queues",
         {"source": "x.jdl", "text": jdl(f"  Requirements = {chain(40000)};")}, says="expression too long"),
    Case("unclosed-30000", "roland", "POST", "/jobs", submit(jdl("  Requirements = " + "(" * 30000 + ";")),
         says="nested too deep"),
    Case("records-4000-match-queues", "roland", "POST", "/match-queues",
         {"source": "x.jdl", "text": jdl(f"  A = {nested_records(4000)};")}, says="nested too deep"),
    Case("ternary-chain", "roland", "POST", "/jobs",
         submit(jdl("  Requirements = " + "true ? " * 500 + "1" + " : 2" * 500 + ";")), says="expression too long"),
    Case("unary-minus-chain", "roland", "POST", "/jobs", submit(jdl("  X = " + "-" * 5000 + "1;")),
         says="expression too long"),
    # characters
    Case("lone-surrogate-escape", "roland", "POST", "/jobs",
         content=raw_json('{"jdls": [{"text": "[Executable = \\"\\udfff\\";]"}]}'), says="jdls.0.text:1:16: lone surrogate"),
    Case("lone-surrogate-raw-bytes", "roland", "POST", "/jobs",
         content=b'{"jdls": [{"text": "[Executable = \\"\xed\xa0\x80\\";]"}]}', says="lone surrogate"),
    Case("nul-in-jdl", "roland", "POST", "/jobs", submit('[\n Executable = "a\x00b";\n]'), says="jdls.0.text:2:17: NUL"),
    Case("nul-in-job-name", "roland", "POST", "/jobs", {**submit(jdl("")), "job_name": "a\x00"}, says="job_name"),
    Case("nul-in-key", "roland", "POST", "/jobs", {**submit(jdl("")), "resource_requests": {"h\x00rt": 1}}, says="NUL"),
    Case("newline-and-nul-in-key", "roland", "POST", "/jobs", {"reservation.\n": {"\x00": 1}}, says="NUL"),
    Case("rqs-description-surrogates", "admin", "POST", "/rqs",
         content=raw_json('{"text": "{\\n name q1\\n description \\"\\ud800\\udc00\\udfff\\"\\n enabled true\\n'
                          ' limit to slots=1\\n}\\n"}'), says="lone surrogate"),
    Case("complexes-nul", "admin", "PUT", "/complexes", {"text": "#name\nx x INT <= YES YES 0 0\x00\n"}, says="NUL"),
    Case("nul-in-query", "roland", "GET", "/jobs?owner=%00", says="query"),
    Case("nul-in-path", "roland", "GET", "/pools/a%00b", says="path"),
    Case("newline-in-pool-id", "roland", "GET", "/pools/a%0Ab", expect=(404,), says="a\\nb"),
    Case("nul-in-pilot-id-path", "admin", "GET", "/pilots/%00/output", says="path"),
    # ids out of the 64-bit range
    Case("job-id-path-2**63", "roland", "GET", f"/jobs/{BIG}", expect=(404, 422)),
    Case("job-id-path-1e20", "roland", "GET", f"/jobs/{HUGE}", expect=(404, 422)),
    Case("job-id-history", "roland", "GET", f"/jobs/{HUGE}/history", expect=(404, 422)),
    Case("job-id-jdl", "roland", "GET", f"/jobs/{HUGE}/jdl", expect=(404, 422)),
    Case("job-id-output", "roland", "GET", f"/jobs/{HUGE}/output", expect=(404, 422)),
    Case("job-id-why", "roland", "GET", f"/jobs/{HUGE}/why", expect=(404, 422)),
    Case("job-id-delete", "roland", "DELETE", f"/jobs/{HUGE}", expect=(404, 422)),
    Case("job-id-negative-huge", "roland", "GET", f"/jobs/-{HUGE}", expect=(404, 422)),
    Case("job-id-query", "roland", "GET", f"/jobs?job_id={HUGE}", expect=(404, 422)),
    Case("job-id-kill-body", "roland", "POST", "/jobs/kill", {"job_ids": [HUGE]}, expect=(404, 422)),
    Case("limit-query", "roland", "GET", f"/jobs?limit={HUGE}", expect=(422,)),
    Case("ar-id-path", "roland", "PATCH", f"/reservations/{HUGE}", {"name": "x"}, expect=(404, 422)),
    Case("pilot-status-exit-code", "pilot", "POST", "/jobs/1/pilot-status",
         {"pilot_id": "p", "status": "Done", "exit_code": HUGE}, expect=(404, 422)),
    Case("heartbeat-attempt", "pilot", "POST", "/jobs/1/heartbeat", {"pilot_id": "p", "attempt": HUGE}, expect=(404, 422)),
    Case("submit-reservation", "roland", "POST", "/jobs", {**submit(jdl("")), "reservation": HUGE}, expect=(422,)),
    Case("submit-slots", "roland", "POST", "/jobs", {**submit(jdl("")), "parallel_environment": "mpi", "slots": HUGE},
         expect=(400, 422)),
    Case("jdl-reservation-huge", "roland", "POST", "/jobs", submit(jdl(f"  Reservation = {HUGE};")), expect=(400, 404)),
    Case("jdl-priority-huge", "roland", "POST", "/jobs", submit(jdl(f"  Priority = {HUGE};"))),
    Case("jdl-cputime-huge", "roland", "POST", "/jobs", submit(jdl(f"  CPUTime = {HUGE};"))),
    Case("jdl-processors-huge", "roland", "POST", "/jobs", submit(jdl(f"  NumberOfProcessors = {HUGE};"))),
    Case("qrdel-pattern-nested", "roland", "POST", "/reservations/delete", {"selectors": ["(" * 5000 + "a"]},
         expect=(400, 404)),
    Case("rqs-filter-pattern-nested", "admin", "POST", "/rqs",
         {"text": "{\n name q3\n limit users " + "!" * 5000 + "a to slots=1\n}\n"}, says="nested too deep"),
    Case("qrdel-huge-id", "roland", "POST", "/reservations/delete", {"selectors": [str(HUGE)]}, expect=(400, 404)),
    Case("qrstat-huge-id", "roland", "GET", f"/reservations?ar={HUGE}", expect=(400, 404)),
    # sizes, and the token before the body
    Case("jdl-too-large", "roland", "POST", "/jobs", submit(jdl(f'  A = "{"x" * (JDL_BYTES + 10)}";')), expect=(413,),
         says="limits.jdl_bytes"),
    Case("body-too-large-no-token", None, "POST", "/jobs", content=b"[" + b"1," * 5_000_000 + b"1]",
         headers={"Content-Type": "application/json"}, expect=(413,), says="limits.request_bytes"),
    Case("body-too-large", "roland", "POST", "/jobs", content=b"[" + b"1," * 5_000_000 + b"1]",
         headers={"Content-Type": "application/json"}, expect=(413,), says="limits.request_bytes"),
    Case("token-before-parse", None, "POST", "/jobs", content=b"{not json", expect=(401,)),
    Case("forged-token-before-parse", "forged", "POST", "/jobs", content=b"{not json", expect=(401,)),
    Case("json-nested-4000", "roland", "POST", "/jobs",
         content=b'{"jdls": [{"text": "[Executable=\\"x\\";]"}], "resource_requests": {"a": ' + b"[" * 4000 + b"]" * 4000
         + b"}}", says="nested too deep"),
    Case("pilot-load-nested", "pilot", "POST", "/matcher/request-job",
         content=b'{"site": "s", "ce": "c", "queue": "q", "host": "h", "pilot_id": "p", "load": {"a": '
         + b"{\"b\": " * 3000 + b"1" + b"}" * 3000 + b"}}", says="nested too deep"),
    # jobs made by one submission
    Case("parametric-million", "roland", "POST", "/jobs", submit(jdl('  Parameters = 1000000; Arguments = "%s";')),
         says="too many jobs"),
    Case("bulk-10001", "roland", "POST", "/jobs",
         {"jdls": [{"source": f"j{i}.jdl", "text": '[Executable="/bin/true";]'} for i in range(10001)]},
         expect=(413,), says="max_jobs_per_submission"),
    # other parsers behind the routes
    Case("rqs-garbage", "admin", "POST", "/rqs", {"text": "{" * 5000}),
    Case("rqs-deep-limit", "admin", "POST", "/rqs",
         {"text": "{\n name q2\n enabled true\n limit to slots=" + "(" * 3000 + "\n}\n"}),
    Case("complexes-surrogates", "admin", "PUT", "/complexes", content=raw_json('{"text": "\\udfff\\udfff"}'),
         says="lone surrogate"),
    Case("qrsub-duration", "admin", "POST", "/reservations", {"duration": "9" * 400, "resources": {"slots": 1}},
         expect=(400, 422)),
    Case("qrsub-resources-nested", "admin", "POST", "/reservations", {"resources": {"h_rt": {"a": [1, 2]}}},
         expect=(400, 422)),
    Case("qrsub-start-year-9999", "admin", "POST", "/reservations",
         {"start": "9999-12-31T23:59:59+00:00", "duration": "99999999:0:0"}, expect=(400, 422)),
    Case("qralter-duration", "roland", "PATCH", "/reservations/1", {"duration": "1:" * 2000}, expect=(400, 404, 422)),
    Case("submit-l-value", "roland", "POST", "/jobs", {**submit(jdl("")), "resource_requests": {"h_rt": "9" * 5000 + "x"}},
         expect=(400,)),
    Case("submit-l-nan", "roland", "POST", "/jobs", content=b'{"jdls": [{"text": "[Executable=\\"x\\";]"}], '
         b'"resource_requests": {"mem_free": NaN}}', expect=(400, 422)),
    Case("quotas-query", "roland", "GET", "/quotas?users=%ff%fe&resources=" + "x" * 5000, expect=(200, 400)),
]


def _token(hostile: Hostile, role: str | None) -> dict[str, str]:
    if role is None:
        return {}
    if role == "forged":
        return {"Authorization": "Bearer forged-token-0000"}
    return {"Authorization": f"Bearer {hostile.tokens[role]}"}


def send(client: httpx.Client, hostile: Hostile, case: Case) -> httpx.Response:
    headers = {**_token(hostile, case.role), **case.headers}
    if case.json is not None:
        return client.request(case.method, case.path, json=case.json, headers=headers)
    return client.request(case.method, case.path, content=case.content, headers=headers)


@pytest.fixture(scope="module")
def client(hostile: Hostile) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hostile.server.url + "/api/v1", timeout=60) as c:
        yield c


def refusal_problem(response: httpx.Response, case: Case) -> str | None:
    """What is wrong with the answer to *case*, or None."""
    if response.status_code not in case.expect:
        return f"{case.name}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        detail = response.json().get("detail")
        if not (isinstance(detail, str) and detail and "\n" not in detail) or case.says not in detail:
            return f"{case.name}: detail {detail!r}"
    return None


def test_every_case_is_refused_and_nothing_is_stored(hostile: Hostile, client: httpx.Client) -> None:
    before = hostile.counts()
    problems = []
    for case in CASES:
        problem = refusal_problem(send(client, hostile, case), case)
        if problem is not None:
            problems.append(problem)
        # the same connection still serves (no reset after an error), the process lives
        assert client.get("/health").status_code == 200, case.name
        assert hostile.server.process is not None and hostile.server.process.poll() is None, case.name
    assert problems == [], "\n".join(problems)
    assert hostile.counts() == before


def test_a_chunked_body_over_the_limit_is_refused(hostile: Hostile, client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"jdls": [{"text": "'
        for _ in range(300):
            yield b"x" * 32768  # 9.8 MB in all, no Content-Length
        yield b'"}]}'

    before = hostile.counts()
    response = client.post("/jobs", content=chunks(), headers={**_token(hostile, "roland"),
                                                              "Content-Type": "application/json"})
    assert response.status_code == 413, response.text
    assert "limits.request_bytes" in response.json()["detail"]
    assert client.get("/health").status_code == 200
    assert hostile.counts() == before


def test_a_good_submission_still_works(hostile: Hostile, client: httpx.Client) -> None:
    before = hostile.counts()["jobs"]
    response = client.post("/jobs", json=submit(jdl("  Requirements = other.CPUTime > 1 && other.Memory >= 10;")),
                           headers=_token(hostile, "roland"))
    assert response.status_code == 201, response.text
    assert hostile.counts()["jobs"] == before + 1


# -- fuzzed JDL bodies -----------------------------------------------------------

PIECES = [
    "[", "]", "{", "}", "(", ")", ";", ",", "=", "==", "&&", "||", "!", "-", "+", "*", "/", "?", ":", ".",
    "other.", "Executable", "Requirements", "Tags", "Parameters", "CPUTime", "Priority", "Reservation",
    "NumberOfProcessors", "ResourceRequests", "Site", "a", "x", "1", "0", "-1", "99999999999999999999", "1e308",
    "1.5", '"s"', '"%s"', '"\\n"', "'q'", "true", "undefined", "error", "member(", "strcat(", "isUndefined(",
    "/*", "*/", "//", "#", "\n", " ", '"', "'", "\\", "\udfff", "\x00", "é", "\u2028",
]
JDL_TEXT = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
    st.lists(st.sampled_from(PIECES), max_size=40).map(lambda p: '[Executable = "x"; A = ' + "".join(p) + "]"),
    st.lists(st.sampled_from(PIECES), max_size=40).map(lambda p: '[Executable = "x"; Requirements = ' + "".join(p) + ";]"),
    st.text(max_size=80),
)


@settings(max_examples=fuzz_examples(60), suppress_health_check=list(HealthCheck), deadline=None)
@given(text=JDL_TEXT, route=st.sampled_from(["/jobs", "/match-queues"]))
def test_fuzzed_jdl_bodies_never_get_a_server_error(hostile: Hostile, client: httpx.Client, text: str,
                                                     route: str) -> None:
    body = submit(text) if route == "/jobs" else {"source": "x.jdl", "text": text}
    response = client.post(route, content=json.dumps(body).encode("utf-8", "surrogatepass"),
                           headers={**_token(hostile, "roland"), "Content-Type": "application/json"})
    assert response.status_code < 500, (text, response.status_code, response.text[:300])
    detail = response.json().get("detail") if response.status_code >= 400 else None
    assert detail is None or (isinstance(detail, str) and "\n" not in detail), detail


# -- fuzzed requests on every route ------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
              st.text(max_size=20), st.sampled_from(["1:0:0", "4G", "*", "(", "12141200", "-1", "roland", "slots=1"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
ROUTE_COUNTS: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def route_report() -> Iterator[None]:
    """With WMS_FUZZ_REPORT set, the fuzzed requests per route are written there (JSON) at the end."""
    yield
    report = os.environ.get("WMS_FUZZ_REPORT")
    if report:
        with open(report, "w") as f:
            json.dump(dict(sorted(ROUTE_COUNTS.items())), f, indent=1)


def routes(hostile: Hostile) -> list[tuple[str, str, list[str], list[str]]]:
    """(method, path, body property names, query parameter names) of every
    route of the running server's OpenAPI."""
    spec = httpx.get(hostile.server.url + "/openapi.json", timeout=30).json()
    out = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            ref = (op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
                   .get("$ref", ""))
            schema = spec.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[-1], {})
            query = sorted(p["name"] for p in op.get("parameters", []) if p.get("in") == "query")
            out.append((method.upper(), path, sorted(schema.get("properties", {})), query))
    return out


@settings(max_examples=fuzz_examples(100), suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_fuzzed_requests_on_every_route_never_get_a_server_error(hostile: Hostile, client: httpx.Client,
                                                                 data: st.DataObject) -> None:
    method, path, properties, query_names = data.draw(st.sampled_from(routes_of(hostile)))
    if path.endswith("/health"):
        return
    params = {name: data.draw(st.one_of(st.integers(-(2**70), 2**70).map(str), st.text(max_size=10)))
              for name in re.findall(r"\{(\w+)\}", path)}
    concrete = _fill(path, params)
    body: Any = None
    if properties:
        body = data.draw(st.one_of(
            st.fixed_dictionaries({}, optional={p: JSON_VALUES for p in properties}),
            JSON_VALUES,
        ))
    query = data.draw(st.lists(st.tuples(st.sampled_from(query_names),
                                         st.one_of(st.integers(-(2**70), 2**70).map(str), st.text(max_size=12))),
                               max_size=3)) if query_names else []
    role = data.draw(st.sampled_from(["roland", "admin", "pilot", None]))
    content = json.dumps(body).encode() if body is not None else None
    response = client.request(method, concrete.removeprefix("/api/v1"), content=content, params=query,
                              headers={**_token(hostile, role), "Content-Type": "application/json"})
    ROUTE_COUNTS[f"{method} {path}"] = ROUTE_COUNTS.get(f"{method} {path}", 0) + 1
    assert response.status_code < 500, (method, concrete, body, response.status_code, response.text[:300])
    if response.status_code >= 400:
        detail = response.json().get("detail")
        assert isinstance(detail, str) and "\n" not in detail, detail


_ROUTES: dict[str, list] = {}


def routes_of(hostile: Hostile) -> list:
    if hostile.backend not in _ROUTES:
        _ROUTES[hostile.backend] = routes(hostile)
    return _ROUTES[hostile.backend]


def _fill(path: str, params: dict[str, str]) -> str:
    """*path* with each ``{name}`` replaced by its value (percent-encoded)."""
    from urllib.parse import quote

    out = path
    for name, value in params.items():
        out = out.replace("{" + name + "}", quote(value, safe="") or "x", 1)
    return out
