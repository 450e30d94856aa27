"""SubmitPools and task queues: /api/v1/matcher/submit-pools, /pools, /task-queues."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from wms.api.deps import RuntimeDep, require
from wms.core.identity import Identity
from wms.services import pools as pools_service
from wms.services import task_queues as tq_service
from wms.services.access import MANAGER, OPERATOR, PILOT, USER

router = APIRouter(tags=["pools"])

Anyone = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]
# Task queues show their owners and requirements: not a pilot's business.
People = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]


@router.get("/matcher/submit-pools")
def submit_pools_for_queue(site: str, ce: str, queue: str, runtime: RuntimeDep, caller: Anyone) -> list[str]:
    """getSubmitPoolsForQueue (specs/002): the pools a pilot on Site/CE/Queue may serve."""
    return pools_service.submit_pools_for_queue(runtime, site, ce, queue)


@router.get("/pools")
def list_pools(runtime: RuntimeDep, caller: Anyone) -> list[dict[str, Any]]:
    return pools_service.list_pools(runtime, caller)


@router.get("/pools/{pool_id}")
def get_pool(pool_id: str, runtime: RuntimeDep, caller: Anyone) -> dict[str, Any]:
    return pools_service.get_pool(runtime, caller, pool_id)


@router.get("/task-queues")
def list_task_queues(runtime: RuntimeDep, caller: People) -> list[dict[str, Any]]:
    return tq_service.list_task_queues(runtime, caller)
