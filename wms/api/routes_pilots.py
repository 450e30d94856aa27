"""Pilots submitted by the SiteDirector: /api/v1/pilots (`wms pilots`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from wms.api.deps import RuntimeDep, require
from wms.core.identity import Identity
from wms.services import pilots as pilots_service
from wms.services.access import MANAGER, OPERATOR, PILOT

router = APIRouter(tags=["pilots"])

Watcher = Annotated[Identity, Depends(require(OPERATOR, MANAGER, PILOT))]
Admin = Annotated[Identity, Depends(require(OPERATOR, MANAGER))]


@router.get("/pilots")
def list_pilots(runtime: RuntimeDep, caller: Watcher) -> list[dict[str, Any]]:
    """Every pilot, oldest first: PilotID, Queue (Site/CE/Queue), Backend, State, JobsRun, Submitted, LastUpdate."""
    return pilots_service.list_pilots(runtime)


@router.get("/pilots/{pilot_id}/output")
def pilot_output(pilot_id: str, runtime: RuntimeDep, caller: Admin) -> dict[str, str]:
    """What the pilot printed (its log): PilotID, Output."""
    return {"PilotID": pilot_id, "Output": pilots_service.pilot_output(runtime, pilot_id)}
