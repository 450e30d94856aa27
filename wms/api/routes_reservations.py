"""/api/v1/reservations: qrsub, qrstat, qrdel, qralter; /api/v1/accounting."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from wms.api import paging

from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import ArIdPath, ReservationDelete, ReservationRequest
from wms.core.identity import Identity
from wms.services import accounting as accounting_service
from wms.services import reservations as ar_service
from wms.services.access import MANAGER, OPERATOR, USER

router = APIRouter(tags=["reservations"])

Caller = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]


@router.post("/reservations", status_code=201, **answers(r.ReservationGrant, 409, 429, status=201))
def submit(body: ReservationRequest, runtime: RuntimeDep, now: NowDep, caller: Caller) -> dict[str, Any]:
    """qrsub: grant an advance reservation (or, with verify, only check it)."""
    return ar_service.submit(runtime, caller, ar_service.ReservationSpec(**body.model_dump()), now)


@router.get("/reservations", **answers(list[r.Reservation], 404))
def show(request: Request, response: Response, runtime: RuntimeDep, caller: Caller,
         ar: Annotated[list[str] | None, Query()] = None, user: Annotated[list[str] | None, Query()] = None,
         limit: paging.Limit = None, cursor: paging.Cursor = None) -> list[dict[str, Any]]:
    """qrstat: one page of the active reservations, by id, or every one named by id, name or name
    pattern (``ar``); X-Next-Cursor and Link say where the next page is (docs/api.md, "Pages")."""
    if ar:
        return ar_service.show(runtime, caller, ar, user or None)
    query = {"user": user or None}
    page = paging.page_of(runtime, "reservations", query, cursor, limit)
    return paging.answer_slice(request, response, "reservations", query,
                               ar_service.show_page(runtime, caller, user or None, page))


@router.post("/reservations/delete", **answers(r.Messages, 404))
def delete(body: ReservationDelete, runtime: RuntimeDep, now: NowDep, caller: Caller) -> dict[str, Any]:
    """qrdel: jobs first, then the reservation; in the order given."""
    return {"messages": ar_service.delete(runtime, caller, body.selectors, body.force, now, body.users)}


@router.patch("/reservations/{ar_id}", **answers(r.ReservationChanged, 409))
def alter(ar_id: ArIdPath, body: ar_service.ReservationChange, runtime: RuntimeDep, now: NowDep, caller: Caller) -> dict[str, Any]:
    """qralter: name, access list, mail, end or duration."""
    return ar_service.alter(runtime, caller, ar_id, body, now)


@router.get("/accounting/reservations", **answers(list[r.ReservationAccount]))
def reservation_accounting(request: Request, response: Response, runtime: RuntimeDep, now: NowDep, caller: Caller,
                           limit: paging.Limit = None, cursor: paging.Cursor = None) -> list[dict[str, Any]]:
    """One page of the reservations, by id: slot-seconds reserved and used by its jobs."""
    page = paging.page_of(runtime, "accounting-reservations", {}, cursor, limit)
    return paging.answer_slice(request, response, "accounting-reservations", {},
                               accounting_service.reservations_page(runtime, caller, now, page))


@router.get("/accounting/jobs", **answers(list[r.JobAccount]))
def job_accounting(request: Request, response: Response, runtime: RuntimeDep, caller: Caller,
                   limit: paging.Limit = None, cursor: paging.Cursor = None) -> list[dict[str, Any]]:
    """One page of the finished jobs, newest first, each with the reservation it ran in (if any)."""
    page = paging.page_of(runtime, "accounting-jobs", {}, cursor, limit)
    return paging.answer(request, response, "accounting-jobs", {}, page,
                         accounting_service.jobs(runtime, caller, page), "JobID")
