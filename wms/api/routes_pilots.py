"""Pilots submitted by the SiteDirector: /api/v1/pilots (`wms pilots`);
a pilot's own token: /api/v1/pilots/token/renew."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from wms.api import paging

from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import TokenRenewal
from wms.core.identity import Identity
from wms.services import pilot_output as pilot_output_service
from wms.services import pilots as pilots_service
from wms.services import tokens as tokens_service
from wms.services.access import MANAGER, OPERATOR, PILOT

router = APIRouter(tags=["pilots"])

Admin = Annotated[Identity, Depends(require(OPERATOR, MANAGER))]
Pilot = Annotated[Identity, Depends(require(PILOT))]


@router.get("/pilots", **answers(list[r.PilotView]))
def list_pilots(request: Request, response: Response, runtime: RuntimeDep, now: NowDep, caller: Admin,
                limit: paging.Limit = None, cursor: paging.Cursor = None) -> list[dict[str, Any]]:
    """One page of the pilots: the SiteDirector's by pilot id, then those started by hand that
    declared themselves, by pilot id: PilotID, Queue (Site/CE/Queue), VO, Backend, State, JobsRun,
    Submitted, LastUpdate, Isolation, IsolationNote; X-Next-Cursor and Link say where the next
    page is (docs/api.md, "Pages")."""
    page = paging.page_of(runtime, "pilots", {}, cursor, limit, key=str)
    return paging.answer_slice(request, response, "pilots", {}, pilots_service.list_pilots_page(runtime, now, page))


@router.post("/pilots/token/renew", **answers(r.RenewedToken))
def renew_token(body: TokenRenewal, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> dict[str, Any]:
    """The calling pilot's token lives pilot_token_lifetime from now (never less than before),
    and holds what the pilot declares (``slots``: never more than before, else 403; ``isolation``):
    TokenID, PilotID, Expires, ExpiresIn (seconds; null: no end), Lifetime, Slots, Isolation."""
    if body.pilot_id is not None:
        caller = tokens_service.bind_pilot(runtime.engine, caller, body.pilot_id,
                                            runtime.caches.verified_tokens)
    lifetime = tokens_service.default_lifetime(runtime.config.settings, PILOT)
    declaration = tokens_service.Declaration(body.slots, body.isolation, body.isolation_note)
    return tokens_service.renew_pilot_token(runtime.engine, caller, now, lifetime, declaration,
                                            runtime.caches.verified_tokens)


@router.get("/pilots/{pilot_id}/output", **answers(r.PilotLog))
def pilot_output(pilot_id: str, runtime: RuntimeDep, caller: Admin) -> dict[str, str]:
    """What the pilot printed (its log): PilotID, Output."""
    return {"PilotID": pilot_id, "Output": pilot_output_service.pilot_output(runtime, pilot_id)}
