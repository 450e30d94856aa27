"""The permission matrix: what every route of the API answers to every kind of
caller, under the default visibility policy (wms/core/visibility.py).

This table is the one statement of it: tests/api/test_permission_matrix.py
sends every route of the app's own route table as each caller to a real
server and checks the outcome against it (a route missing here fails that
test), and docs/security.md shows it, written by
``python -m wms.api.permissions docs/security.md`` (a test checks the page
is current).

The callers, about one object of each kind (a job, a reservation, a task
queue) owned by user ``roland``:

* ``none``, ``forged``, ``expired``: no token, a token the server never
  issued, one past its end;
* ``owner``: roland; ``same VO``: alice (roland's VO and group);
  ``other VO``: andre (VO dteam);
* ``pilot``: a pilot token bound to a pilot that holds none of roland's
  jobs; ``own pilot``: the token of the pilot roland's job was given to;
* ``operator``, ``manager``;
* ``job``: the job token of roland's running job (the ``JobToken`` of its
  hand-out); ``stale_job``: the job token of an attempt that is over (a
  job of roland's handed out, then Done).

The outcomes:

* ``ok``: done (2xx); a list shows roland's object;
* ``hidden``: 2xx, but the list leaves roland's object out;
* ``401``: no valid token;
* ``403``: the caller's role may not, or may see but not change the object;
* ``404``: answered exactly as for an id that does not exist.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

CALLERS = ("none", "forged", "expired", "owner", "same_vo", "other_vo", "pilot", "own_pilot", "operator", "manager",
           "job", "stale_job")
TITLES = {"none": "none", "forged": "forged", "expired": "expired", "owner": "owner", "same_vo": "same VO",
          "other_vo": "other VO", "pilot": "pilot", "own_pilot": "own pilot", "operator": "operator",
          "manager": "manager", "job": "job token", "stale_job": "stale job token"}
OK, HIDDEN = "ok", "hidden"
OUTCOMES = (OK, HIDDEN, "401", "403", "404")

# One line per route: method, path, then one outcome per caller in CALLERS' order.
_TABLE = """
GET    /api/v1/health                              ok  ok  ok  ok  ok     ok     ok     ok  ok  ok  ok  ok
GET    /metrics                                    ok  ok  ok  ok  ok     ok     ok     ok  ok  ok  ok  ok
GET    /api/v1/auth/issuers                        ok  ok  ok  ok  ok     ok     ok     ok  ok  ok  ok  ok
POST   /api/v1/jobs                                401 401 401 ok  ok     ok     403    403 ok  ok  403 401
GET    /api/v1/jobs                                401 401 401 ok  hidden hidden hidden ok  ok  ok  403 401
GET    /api/v1/jobs/{job_id}                       401 401 401 ok  404    404    404    ok  ok  ok  ok  401
GET    /api/v1/jobs/{job_id}/jdl                   401 401 401 ok  404    404    404    ok  ok  ok  ok  401
GET    /api/v1/jobs/{job_id}/history               401 401 401 ok  404    404    404    403 ok  ok  403 401
GET    /api/v1/jobs/{job_id}/output                401 401 401 ok  404    404    404    403 ok  ok  403 401
GET    /api/v1/jobs/{job_id}/why                   401 401 401 ok  404    404    404    403 ok  ok  403 401
GET    /api/v1/jobs/{job_id}/match-queues          401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/jobs/kill                           401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/jobs/hold                           401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/jobs/release                        401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/jobs/reschedule                     401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/jobs/delete                         401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/jobs/alter                          401 401 401 ok  404    404    403    403 ok  ok  403 401
DELETE /api/v1/jobs/{job_id}                       401 401 401 ok  404    404    403    403 ok  ok  403 401
POST   /api/v1/match-queues                        401 401 401 ok  ok     ok     403    403 ok  ok  403 401
POST   /api/v1/matcher/request-job                 401 401 401 403 403    403    ok     ok  ok  ok  403 401
POST   /api/v1/matcher/request-jobs                401 401 401 403 403    403    ok     ok  ok  ok  403 401
POST   /api/v1/jobs/pilot-status                   401 401 401 403 403    403    hidden ok  ok  ok  403 401
POST   /api/v1/jobs/{job_id}/pilot-status          401 401 401 403 403    403    404    ok  ok  ok  403 401
POST   /api/v1/jobs/{job_id}/heartbeat             401 401 401 403 403    403    404    ok  ok  ok  403 401
POST   /api/v1/jobs/{job_id}/output                401 401 401 403 403    403    404    ok  ok  ok  403 401
POST   /api/v1/jobs/{job_id}/application-status    401 401 401 403 403    403    404    ok  ok  ok  ok  401
GET    /api/v1/matcher/submit-pools                401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
GET    /api/v1/pools                               401 401 401 ok  ok     hidden ok     ok  ok  ok  403 401
GET    /api/v1/pools/{pool_id}                     401 401 401 ok  ok     404    ok     ok  ok  ok  403 401
GET    /api/v1/task-queues                         401 401 401 ok  ok     hidden 403    403 ok  ok  403 401
GET    /api/v1/queues                              401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
GET    /api/v1/complexes                           401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
PUT    /api/v1/complexes                           401 401 401 403 403    403    403    403 403 ok  403 401
GET    /api/v1/pilots                              401 401 401 403 403    403    403    403 ok  ok  403 401
POST   /api/v1/pilots/token/renew                  401 401 401 403 403    403    ok     ok  403 403 403 401
GET    /api/v1/pilots/{pilot_id}/output            401 401 401 403 403    403    403    403 ok  ok  403 401
POST   /api/v1/reservations                        401 401 401 ok  ok     ok     403    403 ok  ok  403 401
GET    /api/v1/reservations                        401 401 401 ok  ok     ok     403    403 ok  ok  403 401
PATCH  /api/v1/reservations/{ar_id}                401 401 401 ok  403    403    403    403 ok  ok  403 401
POST   /api/v1/reservations/delete                 401 401 401 ok  403    403    403    403 ok  ok  403 401
GET    /api/v1/accounting/reservations             401 401 401 ok  ok     ok     403    403 ok  ok  403 401
GET    /api/v1/accounting/jobs                     401 401 401 ok  hidden hidden 403    403 ok  ok  403 401
GET    /api/v1/rqs                                 401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
GET    /api/v1/rqs/names                           401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
GET    /api/v1/rqs/template                        401 401 401 403 403    403    403    403 ok  ok  403 401
POST   /api/v1/rqs                                 401 401 401 403 403    403    403    403 ok  ok  403 401
PUT    /api/v1/rqs                                 401 401 401 403 403    403    403    403 ok  ok  403 401
DELETE /api/v1/rqs                                 401 401 401 403 403    403    403    403 ok  ok  403 401
POST   /api/v1/rqs/attributes                      401 401 401 403 403    403    403    403 ok  ok  403 401
GET    /api/v1/quotas                              401 401 401 ok  ok     ok     403    403 ok  ok  403 401
GET    /api/v1/sandboxes/limits                    401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
PUT    /api/v1/sandboxes/{sha256}                  401 401 401 ok  ok     ok     403    403 ok  ok  403 401
GET    /api/v1/jobs/{job_id}/sandbox               401 401 401 ok  404    404    404    ok  ok  ok  403 401
GET    /api/v1/jobs/{job_id}/sandbox/{kind}/{name} 401 401 401 ok  404    404    403    403 ok  ok  403 401
PUT    /api/v1/jobs/{job_id}/sandbox/output/{name} 401 401 401 403 403    403    404    ok  ok  ok  403 401
GET    /api/v1/whoami                              401 401 401 ok  ok     ok     ok     ok  ok  ok  403 401
GET    /api/v1/overview                            401 401 401 ok  ok     ok     403    403 ok  ok  403 401
"""


def _parse(text: str) -> dict[tuple[str, str], dict[str, str]]:
    table: dict[tuple[str, str], dict[str, str]] = {}
    for line in text.strip().splitlines():
        method, path, *cells = line.split()
        assert len(cells) == len(CALLERS), f"{method} {path}: {len(cells)} outcomes for {len(CALLERS)} callers"
        assert set(cells) <= set(OUTCOMES), f"{method} {path}: unknown outcome in {cells}"
        assert (method, path) not in table, f"{method} {path} is listed twice"
        table[(method, path)] = dict(zip(CALLERS, cells))
    return table


EXPECTED: dict[tuple[str, str], dict[str, str]] = _parse(_TABLE)


def api_routes(app: FastAPI) -> Iterator[tuple[str, str]]:
    """(method, path) of every API route of ``app``, included routers' routes as well."""
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute):
            for method in sorted(context.methods or ()):
                yield method, context.path


# ---------------------------------------------------------------- docs/security.md
BEGIN = "<!-- permission matrix: python -m wms.api.permissions docs/security.md -->"
END = "<!-- end of the permission matrix -->"


def render_markdown() -> str:
    """The matrix as a Markdown table, with the markers that delimit it in docs/security.md."""
    lines = [BEGIN, "", "| route | " + " | ".join(TITLES[c] for c in CALLERS) + " |",
             "|---|" + "---|" * len(CALLERS)]
    for (method, path), cells in EXPECTED.items():
        lines.append(f"| `{method} {path}` | " + " | ".join(cells[c] for c in CALLERS) + " |")
    return "\n".join([*lines, "", END])


def with_matrix(page: str) -> str:
    """``page`` with the text between the markers replaced by the current matrix."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + render_markdown() + page[end:]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m wms.api.permissions docs/security.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(with_matrix(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
