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


@router.get("/pilots")
def list_pilots(runtime: RuntimeDep, caller: Watcher) -> list[dict[str, Any]]:
    """Every pilot, oldest first: PilotID, Queue (Site/CE/Queue), Backend, State, JobsRun, Submitted, LastUpdate."""
    return pilots_service.list_pilots(runtime)
