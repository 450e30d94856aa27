"""Pilots submitted by the SiteDirector: /api/v1/pilots (`wms pilots`);
a pilot's own token: /api/v1/pilots/token/renew."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import TokenRenewal
from wms.core.identity import Identity
from wms.services import pilots as pilots_service
from wms.services import tokens as tokens_service
from wms.services.access import MANAGER, OPERATOR, PILOT

router = APIRouter(tags=["pilots"])

Admin = Annotated[Identity, Depends(require(OPERATOR, MANAGER))]
Pilot = Annotated[Identity, Depends(require(PILOT))]


@router.get("/pilots", **answers(list[r.PilotView]))
def list_pilots(runtime: RuntimeDep, caller: Admin) -> list[dict[str, Any]]:
    """Every pilot, oldest first: PilotID, Queue (Site/CE/Queue), VO, Backend, State, JobsRun, Submitted, LastUpdate."""
    return pilots_service.list_pilots(runtime)


@router.post("/pilots/token/renew", **answers(r.RenewedToken))
def renew_token(body: TokenRenewal, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> dict[str, Any]:
    """The calling pilot's token lives pilot_token_lifetime from now (never less than before):
    TokenID, PilotID, Expires, ExpiresIn (seconds; null: no end), Lifetime."""
    if body.pilot_id is not None:
        caller = tokens_service.bind_pilot(runtime.engine, caller, body.pilot_id,
                                            runtime.caches.verified_tokens)
    lifetime = tokens_service.default_lifetime(runtime.config.settings, PILOT)
    return tokens_service.renew_pilot_token(runtime.engine, caller, now, lifetime)


@router.get("/pilots/{pilot_id}/output", **answers(r.PilotLog))
def pilot_output(pilot_id: str, runtime: RuntimeDep, caller: Admin) -> dict[str, str]:
    """What the pilot printed (its log): PilotID, Output."""
    return {"PilotID": pilot_id, "Output": pilots_service.pilot_output(runtime, pilot_id)}
