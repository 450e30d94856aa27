"""SubmitPools and task queues: /api/v1/matcher/submit-pools, /pools, /task-queues."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from wms.api import paging
from wms.api import responses as r
from wms.api.deps import RuntimeDep, require
from wms.api.openapi import answers
from wms.core.identity import Identity
from wms.services import pools as pools_service
from wms.services import task_queues as tq_service
from wms.services.access import MANAGER, OPERATOR, PILOT, USER

router = APIRouter(tags=["pools"])

Anyone = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]
# Task queues show their owners and requirements: not a pilot's business.
People = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]


@router.get("/matcher/submit-pools", **answers(list[str]))
def submit_pools_for_queue(site: str, ce: str, queue: str, runtime: RuntimeDep, caller: Anyone) -> list[str]:
    """getSubmitPoolsForQueue (specs/002): the pools a pilot on Site/CE/Queue may serve."""
    return pools_service.submit_pools_for_queue(runtime, site, ce, queue)


@router.get("/pools", **answers(list[r.SubmitPool]))
def list_pools(request: Request, response: Response, runtime: RuntimeDep, caller: Anyone,
               limit: paging.Limit = None, cursor: paging.Cursor = None) -> list[dict[str, Any]]:
    """One page of the pools the caller sees, by id; X-Next-Cursor and Link (rel="next") say
    where the next page is (docs/api.md, "Pages")."""
    page = paging.page_of(runtime, "pools", {}, cursor, limit, key=str)
    return paging.answer(request, response, "pools", {}, page, pools_service.list_pools(runtime, caller, page),
                         "SubmitPool")


@router.get("/pools/{pool_id}", **answers(r.SubmitPool))
def get_pool(pool_id: str, runtime: RuntimeDep, caller: Anyone) -> dict[str, Any]:
    return pools_service.get_pool(runtime, caller, pool_id)


@router.get("/task-queues", **answers(list[r.TaskQueue]))
def list_task_queues(request: Request, response: Response, runtime: RuntimeDep, caller: People,
                     limit: paging.Limit = None, cursor: paging.Cursor = None) -> list[dict[str, Any]]:
    """One page of the task queues the caller sees, by id (docs/api.md, "Pages")."""
    page = paging.page_of(runtime, "task-queues", {}, cursor, limit)
    return paging.answer(request, response, "task-queues", {}, page,
                         tq_service.list_task_queues(runtime, caller, page), "TaskQueue")
