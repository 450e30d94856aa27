"""ClassAd function calls with hostile arguments, submitted as a JDL's
Requirements through the API: the answer is a 2xx or a 4xx whose
``detail`` is one line, never a 5xx, whatever classad2 raises on them
(its ClassAdException, a ValueError of absTime's conversion, ...).

The calls nest: an argument is a literal at the edges of its type, a
reference to the pilot's or queue's ad, or another call. Bounded by the
hypothesis profile of tests/conftest.py; `make fuzz` runs fifty times the
examples.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import ROLAND, default_config
from wms.api.app import create_app
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

FUNCTIONS = [
    "absTime", "relTime", "formatTime", "interval", "time", "strcat", "substr", "strcmp", "stricmp", "toUpper",
    "toLower", "size", "regexp", "regexps", "regexpMember", "replace", "replaceAll", "stringListsIntersect",
    "stringListMember", "stringListSize", "stringListSum", "stringListAvg", "splitUserName", "splitSlotName",
    "split", "join", "unparse", "eval", "sum", "avg", "min", "max", "member", "identicalMember", "int", "real",
    "string", "bool", "floor", "ceiling", "round", "pow", "quantize", "random", "ifThenElse", "isUndefined",
    "isError", "isString", "isList", "debug", "envV1ToV2", "mergeEnvironment",
]
LITERALS = [
    '"\\u0000"', '"\\u0000x"', '""', '"("', '"*"', '"[a-"', '"%Q%Z%"', '"a@b@c"', '"a,b, c"', '"1e999999"',
    '"-1"', '"x"', '"\\\\"', '"2020-99-99T99:99:99"', '"' + "9" * 40 + '"', '"é"', '"\\ud800"',
    "0", "-1", "1", "9223372036854775807", "-9223372036854775807", "99999999999999999", "-99999999999999999",
    "1e308", "-1e308", "1e-320", 'real("INF")', '-real("INF")', 'real("NaN")',
    "true", "undefined", "error", "{}", '{1, "a", {}}', "{1, 2.5, true}", "[ a = 1; b = \"x\" ]",
    "other.FreeSlots", "other.FreeSlots - 1", "other.Platform", "other.Missing", "my.Missing",
]


def calls() -> st.SearchStrategy[str]:
    def call(args: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.builds(lambda f, a: f"{f}({', '.join(a)})", st.sampled_from(FUNCTIONS), st.lists(args, max_size=4))

    return st.recursive(st.sampled_from(LITERALS), call, max_leaves=8).filter(lambda text: "(" in text)


REQUIREMENTS = st.one_of(
    calls(),
    st.builds(lambda a, op, b: f"{a} {op} {b}", calls(), st.sampled_from(["==", "!=", ">=", "=?=", "&&", "+"]),
              st.one_of(calls(), st.sampled_from(LITERALS))),
)


@pytest.fixture
def roland(engine) -> TestClient:
    runtime = Runtime.create(default_config(), engine)
    client = TestClient(create_app(runtime))
    token = create_token(runtime.engine, ROLAND, datetime.now(timezone.utc))
    client.headers["Authorization"] = f"Bearer {token}"
    return client


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)   # the library is the subject, not the database
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(REQUIREMENTS, st.sampled_from(["/api/v1/jobs", "/api/v1/match-queues"]))
@example('absTime("\\u0000")', "/api/v1/jobs")
@example('absTime("\\u0000")', "/api/v1/match-queues")
@example("random(0) >= 0", "/api/v1/jobs")
@example('eval("absTime(\\"\\u0000\\")")', "/api/v1/match-queues")
def test_hostile_function_calls_are_never_a_server_error(roland: TestClient, requirements: str, route: str) -> None:
    text = f'[ Executable = "/bin/true"; Requirements = {requirements}; ]'
    body = {"jdls": [{"source": "f.jdl", "text": text}]} if route.endswith("/jobs") else {"source": "f.jdl", "text": text}
    answer = roland.post(route, json=body)
    assert answer.status_code < 500, (requirements, answer.text)
    if answer.status_code >= 400:
        detail = answer.json()["detail"]
        assert detail and "\n" not in detail and len(detail) < 1000, detail
