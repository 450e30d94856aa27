"""The OpenAPI document: every route typed, its errors listed in the one error shape, bearer auth.

Built from the app's own route table, so a new route is checked as soon as
it exists. The answers themselves are checked against the document on a
real server in test_openapi_schemathesis.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.helpers import default_config

from wms.api import openapi
from wms.api.app import create_app
from wms.api.guard import error_response
from wms.core.errors import Unavailable
from wms.db.engine import make_engine
from wms.services.runtime import Runtime

ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    """The app on a database it never opens: the document and Starlette's refusals need none."""
    return create_app(Runtime.create(default_config(), make_engine("sqlite://")))


@pytest.fixture(scope="module")
def document(app) -> dict[str, Any]:
    return TestClient(app).get("/openapi.json").json()


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op) for path, ops in document["paths"].items() for method, op in ops.items()]


def test_every_route_of_the_app_is_in_the_document(app, document):
    routes = {(method, route.path_format) for route in openapi.api_routes(app) for method in route.methods or ()
              if route.original_route.include_in_schema}       # /metrics is Prometheus' text, not the API
    assert routes == {(method, path) for method, path, _ in operations(document)}
    assert len(routes) >= 40


def test_every_success_answer_has_a_model(document):
    for method, path, op in operations(document):
        [success] = [code for code in op["responses"] if code.startswith("2")]
        if success == "204":
            assert "content" not in op["responses"][success], (method, path)
            continue
        content = op["responses"][success]["content"]
        if "application/octet-stream" in content:       # a file's bytes
            assert content["application/octet-stream"]["schema"] == {"type": "string", "format": "binary"}
            continue
        schema = content["application/json"]["schema"]
        named = schema.get("$ref") or schema.get("items", {}).get("$ref") or schema.get("items", {}).get("type")
        assert named, f"{method} {path}: the answer has no model ({schema})"


def test_every_error_answer_has_the_one_error_shape(document):
    for method, path, op in operations(document):
        errors = {code: answer for code, answer in op["responses"].items() if code[0] in "45"}
        assert "400" in errors, (method, path)
        for code, answer in errors.items():
            assert answer["content"]["application/json"]["schema"] == ERROR_REF, (method, path, code)
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert schemas["ErrorResponse"]["required"] == ["detail"]


def test_routes_with_a_token_document_401_403_and_the_bearer_scheme(document):
    assert document["components"]["securitySchemes"] == {
        "bearerAuth": {"type": "http", "scheme": "bearer", "description": openapi.BEARER_DESCRIPTION}}
    for method, path, op in operations(document):
        if path in ("/api/v1/health", "/api/v1/auth/issuers"):      # public: asked before one has a token
            assert "security" not in op and "401" not in op["responses"]
            continue
        assert op["security"] == [{"bearerAuth": []}], (method, path)
        assert {"401", "403", "503"} <= set(op["responses"]), (method, path)
        assert op["responses"]["503"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}


@pytest.mark.parametrize("method,path,codes", [
    ("GET", "/api/v1/jobs/{job_id}", {"404", "422"}),                 # a path parameter
    ("POST", "/api/v1/jobs", {"413", "422", "409"}),                  # a body; 409 named by the route
    ("POST", "/api/v1/reservations", {"409", "413", "422", "429"}),   # max_advance_reservations
    ("GET", "/api/v1/pools", {"400", "422"}),                        # a page's cursor and limit
    ("GET", "/api/v1/complexes", set()),                              # no parameter, no body
])
def test_each_route_lists_the_errors_it_can_give(document, method, path, codes):
    op = document["paths"][path][method.lower()]
    assert codes <= set(op["responses"])
    if not codes:
        assert not {"404", "413", "422"} & set(op["responses"])


def test_no_path_or_query_parameter_is_documented_as_null(document):
    # schemathesis took `GET /reservations?user=false` for a value the schema forbids
    # (anyOf [array, null]), which the server rightly reads as the user "false"
    for method, path, op in operations(document):
        for parameter in op.get("parameters", []):
            assert "anyOf" not in parameter["schema"], (method, path, parameter)
    user = next(p for p in document["paths"]["/api/v1/reservations"]["get"]["parameters"] if p["name"] == "user")
    assert user["schema"] == {"type": "array", "items": {"type": "string"}, "title": "User"}


@pytest.mark.parametrize("schema,expected", [
    ({"anyOf": [{"type": "string"}, {"type": "null"}], "title": "S"}, {"type": "string", "title": "S"}),
    ({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}, {"type": "integer", "minimum": 1}),
    ({"type": "string"}, {"type": "string"}),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]}),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
     {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
])
def test_without_null(schema, expected):
    assert openapi.without_null(schema) == expected


def test_the_docs_page_offers_authorize(app):
    client = TestClient(app)
    page = client.get("/docs")
    assert page.status_code == 200 and "/openapi.json" in page.text
    assert client.get("/openapi.json").json()["info"]["description"].startswith("Jobs, task queues and pilots")


def test_a_route_cannot_name_an_error_status_the_api_does_not_document():
    with pytest.raises(ValueError, match=r"undocumented error status \[418\]"):
        openapi.answers(None, 418)


# ---------------------------------------------------------------- the one error shape, on every path
def test_a_request_without_a_body_names_the_body(as_user):
    # was ": Field required": the location was dropped with nothing left
    response = as_user("admin").post("/rqs", None)
    assert response.status_code == 422
    assert response.json()["detail"] == "body: Field required"
    assert response.json()["errors"] == [{"type": "missing", "loc": ["body"], "msg": "Field required"}]


def test_a_body_that_is_not_json_says_so_and_where(client, tokens):
    # was "1: JSON decode error": pydantic's location is a character offset
    response = client.post("/api/v1/jobs", content=b"{not json",
                           headers={"Authorization": f"Bearer {tokens['roland']}", "Content-Type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"] == ("body: not valid JSON at character 1: "
                                         "Expecting property name enclosed in double quotes")


def test_an_unknown_path_says_where_the_api_is(app):
    response = TestClient(app).get("/api/v2/jobs")
    assert response.status_code == 404
    assert response.json()["detail"] == "no such path: /api/v2/jobs (the API is under /api/v1; /docs lists every route)"


def test_a_method_a_route_does_not_take_says_so(app):
    response = TestClient(app).put("/api/v1/health")
    assert response.status_code == 405
    assert response.json()["detail"] == "method PUT is not allowed on /api/v1/health (/docs lists what is)"
    assert response.headers["allow"] == "GET"


def test_a_503_says_when_to_try_again():
    response = error_response(Unavailable("the database took longer than 5 s"))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.body == b'{"detail":"the database took longer than 5 s"}'


@pytest.mark.parametrize("user,path,body,detail", [
    # make fuzz: `{"job_ids": [true, true]}` killed job 1 twice over (pydantic read true as 1)
    ("roland", "/jobs/kill", {"job_ids": [True, True]}, "job_ids.0: Input should be a valid integer"),
    ("roland", "/jobs", {"jdls": [{"text": "[Executable = \"/bin/true\";]"}], "reservation": "1"},
     "reservation: Input should be a valid integer"),
    ("pilot", "/matcher/request-job", {"site": "S", "ce": "C", "queue": "Q", "host": "h", "pilot_id": "p",
                                       "cpu_time_left": True}, "cpu_time_left: Input should be a valid number"),
    ("pilot", "/jobs/1/pilot-status", {"pilot_id": "p", "status": "Done", "exit_code": False},
     "exit_code: Input should be a valid integer"),
    ("pilot", "/jobs/1/output", {"pilot_id": "p", "truncated": "yes"}, "truncated: Input should be a valid boolean"),
    ("admin", "/reservations", {"duration": "1:00:00", "verify": 1}, "verify: Input should be a valid boolean"),
])
def test_a_body_number_or_boolean_must_be_one_in_json(as_user, user, path, body, detail):
    response = as_user(user).post(path, body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == detail


def test_a_body_integer_is_still_read_as_json_gives_it(as_user, runtime):
    ids = as_user("roland").post("/jobs", {"jdls": [{"text": "[Executable = \"/bin/true\";]"}]}).json()["job_ids"]
    response = as_user("roland").post("/jobs/kill", {"job_ids": ids})
    assert response.status_code == 200 and response.json()["killed"] == ids
