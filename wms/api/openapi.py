"""The OpenAPI document: success models, the error answers of each route, bearer auth.

A route names its success model and the errors only its service can give
(``**answers(JobSummary, 404)``); the errors its shape implies are added here
from the route table, so that a new route cannot forget them:

- every route: 400 (a NUL in the path or query, a Content-Length that is not
  a number: the input guard refuses these before any route);
- a route with a policy (``require``): 401, 403, 503 (authentication reads
  the database, whose statements have a time limit), and the bearer scheme;
- a body: 401 (the guard authenticates before reading it) and 413;
- parameters or a body: 422; a path parameter: 404.

Every error has the one shape of :class:`wms.api.responses.ErrorResponse`.
The success models document the JSON and do not filter it
(``response_model=None``): what a route returns is sent as it is.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts

from wms.api.deps import POLICY_ATTRIBUTE
from wms.api.responses import ErrorResponse

BEARER = "bearerAuth"
ERROR_SCHEMA = "ErrorResponse"
BEARER_DESCRIPTION = "a token from `wms admin token create` (or the one `wms up` writes)"

#: What each error status means in this API (the descriptions in /docs).
ERRORS: dict[int, str] = {
    400: "the request breaks a rule (a JDL that does not parse, a value out of range, a NUL character): "
         "nothing was stored",
    401: "no bearer token, or one that is unknown, expired or revoked",
    403: "the token's role may not do this, or the object belongs to someone else",
    404: "no such object",
    409: "the object's state does not allow this now (held by another pilot, already exists, changed "
         "meanwhile)",
    413: "the body is larger than limits.request_bytes, or a part of it larger than its own limit",
    422: "a parameter or body field is missing or of the wrong type; errors lists each one",
    429: "a configured maximum is reached (max_advance_reservations)",
    503: "the database did not answer within limits.statement_timeout; nothing was changed, try again "
         "after Retry-After seconds",
}

RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again",
                               "schema": {"type": "integer"}}}


# A success answer that is a file's bytes rather than JSON.
BINARY = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


def answers(model: Any, *errors: int, status: int = 200, description: str = "Successful Response") -> dict[str, Any]:
    """Keywords for a route decorator: ``model`` documents the success answer
    (``None``: no body, BINARY: raw bytes), ``errors`` the statuses only the route's service gives."""
    unknown = [code for code in errors if code not in ERRORS]
    if unknown:
        raise ValueError(f"undocumented error status {unknown}: add it to ERRORS")
    success: dict[str, Any] = {"description": description}
    if model is BINARY:
        success["content"] = BINARY
    elif model is not None:
        success["model"] = model
    responses: dict[int | str, dict[str, Any]] = {status: success}
    responses.update({code: {"model": ErrorResponse, "description": ERRORS[code]} for code in errors})
    return {"response_model": None, "responses": responses}


def api_routes(app: FastAPI) -> list[RouteContext]:
    """Every API route of ``app`` with its full path (``route.path_format``).

    FastAPI keeps an included router as one entry of ``app.routes``: its
    routes, prefixed, are only seen through their contexts."""
    return [ctx for ctx in iter_route_contexts(app.routes) if isinstance(ctx.original_route, APIRoute)]


def implied_errors(route: RouteContext) -> set[int]:
    """The error statuses a route's shape implies (see the module docstring)."""
    codes = {400}
    if needs_token(route):
        codes |= {401, 403, 503}
    if route.body_field is not None:
        codes |= {401, 413, 422}
    if route.dependant.path_params:
        codes |= {404, 422}
    if route.dependant.query_params:
        codes.add(422)
    return codes


def needs_token(route: RouteContext) -> bool:
    return any(getattr(dep.call, POLICY_ATTRIBUTE, None) for dep in route.dependant.dependencies)


def error_schemas() -> dict[str, Any]:
    """ErrorResponse and the models it refers to, as components."""
    schema = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
    nested = schema.pop("$defs", {})
    return {ERROR_SCHEMA: schema, **nested}


def error_answer(code: int) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": ERRORS[code],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}},
    }
    if code == 503:
        answer["headers"] = RETRY_AFTER
    return answer


def without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without pydantic's ``anyOf [X, null]`` for an optional
    one: a path or query string cannot carry null, the parameter is left out.
    Documented as null-able, a generator takes ``?user=false`` for a
    schema-violating value, while the server reads the string "false"."""
    branches = schema.get("anyOf")
    if not isinstance(branches, list):
        return schema
    kept = [b for b in branches if b != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(branches):
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest}


def build_document(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app``, completed as the module docstring says."""
    document = get_openapi(title=app.title, version=app.version, description=app.description,
                           routes=app.routes)
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(error_schemas())
    # FastAPI's own 422 model is replaced by the API's one error shape.
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    components["securitySchemes"] = {BEARER: {"type": "http", "scheme": "bearer", "description": BEARER_DESCRIPTION}}
    for route in api_routes(app):
        if not route.original_route.include_in_schema:      # /metrics: Prometheus' text, not the API's
            continue
        codes = implied_errors(route) | {int(c) for c in route.responses if str(c).isdigit() and int(c) >= 400}
        for method in route.methods or ():
            operation = document["paths"][route.path_format][method.lower()]
            for parameter in operation.get("parameters", []):
                parameter["schema"] = without_null(parameter["schema"])
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                responses[str(code)] = error_answer(code)
            if needs_token(route):
                operation["security"] = [{BEARER: []}]
    return document


def install(app: FastAPI) -> None:
    """Serve the completed document at /openapi.json (built once, on first use)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_document(app)
        return app.openapi_schema

    setattr(app, "openapi", openapi)

