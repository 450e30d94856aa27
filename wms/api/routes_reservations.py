"""/api/v1/reservations: qrsub, qrstat, qrdel, qralter; /api/v1/accounting."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import ArIdPath, ReservationChange, ReservationDelete, ReservationRequest
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
def show(runtime: RuntimeDep, caller: Caller, ar: Annotated[list[str] | None, Query()] = None,
         user: Annotated[list[str] | None, Query()] = None) -> list[dict[str, Any]]:
    """qrstat: the active reservations, or those named by id, name or name pattern."""
    return ar_service.show(runtime, caller, ar or None, user or None)


@router.post("/reservations/delete", **answers(r.Messages, 404))
def delete(body: ReservationDelete, runtime: RuntimeDep, now: NowDep, caller: Caller) -> dict[str, Any]:
    """qrdel: jobs first, then the reservation; in the order given."""
    return {"messages": ar_service.delete(runtime, caller, body.selectors, body.force, now, body.users)}


@router.patch("/reservations/{ar_id}", **answers(r.ReservationChanged, 409))
def alter(ar_id: ArIdPath, body: ReservationChange, runtime: RuntimeDep, now: NowDep, caller: Caller) -> dict[str, Any]:
    """qralter: name, access list, mail, end or duration."""
    return ar_service.alter(runtime, caller, ar_id, ar_service.Changes(**body.model_dump()), now)


@router.get("/accounting/reservations", **answers(list[r.ReservationAccount]))
def reservation_accounting(runtime: RuntimeDep, now: NowDep, caller: Caller) -> list[dict[str, Any]]:
    """Per reservation: slot-seconds reserved and used by its jobs."""
    return accounting_service.reservations(runtime, caller, now)


@router.get("/accounting/jobs", **answers(list[r.JobAccount]))
def job_accounting(runtime: RuntimeDep, caller: Caller) -> list[dict[str, Any]]:
    """Finished jobs, each with the reservation it ran in (if any)."""
    return accounting_service.jobs(runtime, caller)
