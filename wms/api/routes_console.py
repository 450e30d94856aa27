"""What the web console asks besides the rest of /api/v1: who the caller is
and what the routes let that role do (so the console offers nothing the
server would refuse), and the overview page's counts in one request."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from wms.api import responses as r
from wms.api.deps import NowDep, RuntimeDep, public, require
from wms.api.openapi import answers
from wms.api.policies import role_table
from wms.core.identity import Identity
from wms.services import overview as overview_service
from wms.services import reservations as reservations_service
from wms.services.access import MANAGER, OPERATOR, TOKEN_ROLES, USER

router = APIRouter(tags=["console"])

# Every stored token's role; a job token has no business with the console.
Anyone = Annotated[Identity, Depends(require(*TOKEN_ROLES))]
People = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]

#: The actions the console offers or hides, each named by the route that does
#: it: whether a role may is read from that route's own access policy, so the
#: rule stays in one place.
ACTIONS = (
    "POST /jobs", "POST /jobs/kill", "POST /jobs/hold", "POST /jobs/release",
    "POST /jobs/reschedule", "POST /jobs/delete", "POST /jobs/alter", "GET /jobs/{job_id}/why", "GET /queues", "GET /task-queues", "GET /pools",
    "GET /reservations", "POST /reservations", "PATCH /reservations/{ar_id}", "POST /reservations/delete",
    "GET /quotas", "GET /rqs", "PUT /rqs", "POST /rqs/attributes", "GET /complexes", "PUT /complexes",
    "GET /pilots", "GET /overview",
)


@router.get("/auth/issuers", dependencies=[Depends(public)], **answers(r.SignIn))
def sign_in_issuers(runtime: RuntimeDep) -> dict[str, Any]:
    """The identity providers `wms login` and the console may sign in with (wms.yaml ``identity_providers``
    that name a ``client_id`` or a ``console_client_id``). Public: one needs it before one has a token."""
    return {"Issuers": [{"Issuer": entry.issuer, "VO": entry.vo, "ClientID": entry.client_id,
                         "ConsoleClientID": entry.console_client_id, "Scope": entry.scope,
                         "DeviceEndpoint": entry.device_endpoint}
                        for entry in runtime.config.settings.identity_providers
                        if entry.client_id is not None or entry.console_client_id is not None]}


@router.get("/whoami", **answers(r.WhoAmI))
def whoami(request: Request, runtime: RuntimeDep, caller: Anyone) -> dict[str, Any]:
    """The caller's user, group, VO and role, and which console actions the role may take."""
    from wms.api.app import API_PREFIX  # here: app.py imports this module

    roles = role_table(request.app, API_PREFIX)
    allowed = {action: caller.role in roles.get(action, ()) for action in ACTIONS}
    # Submitting reservations also takes membership of arusers (specs/003): not offered without it.
    allowed["POST /reservations"] = allowed["POST /reservations"] and reservations_service.may_submit(runtime, caller)
    return {"User": caller.user, "Group": caller.group, "VO": caller.vo, "Role": caller.role, "Allowed": allowed}


@router.get("/overview", **answers(r.Overview))
def overview(runtime: RuntimeDep, now: NowDep, caller: People) -> dict[str, Any]:
    """Jobs by state, pilots by state (administrators), matches in the last minutes, full queues."""
    return overview_service.overview(runtime, caller, now)

