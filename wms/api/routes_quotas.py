"""/api/v1/rqs (qconf's resource quota switches) and /api/v1/quotas (qquota)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from wms.api import responses as r
from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.core.identity import Identity
from wms.services import quotas as quotas_service
from wms.services.access import MANAGER, OPERATOR, PILOT, USER

router = APIRouter(tags=["resource quotas"])

Reader = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]
# Usage per user is about people: pilots have no quota and need none of it.
People = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]
Admin = Annotated[Identity, Depends(require(OPERATOR, MANAGER))]


class RuleSetText(BaseModel):
    """Rule sets in sge_resource_quota(5) syntax; ``name`` selects one set to modify."""

    model_config = ConfigDict(extra="forbid")

    text: str
    name: str | None = None
    source: str = "rule set file"


class AttributeChange(BaseModel):
    """qconf -aattr/-Aattr/-dattr/-Dattr/-mattr/-Mattr/-rattr/-Rattr resource_quota."""

    model_config = ConfigDict(extra="forbid")

    switch: str
    attribute: str
    value: str
    target: str


def _names(names: str | None) -> list[str]:
    return [n for n in (names or "").split(",") if n]


@router.get("/rqs", **answers(r.Text, 404))
def show(runtime: RuntimeDep, caller: Reader, names: str | None = None) -> dict[str, Any]:
    """qconf -srqs [names]: the rule sets in canonical form."""
    return {"text": quotas_service.show(runtime, _names(names))}


@router.get("/rqs/names", **answers(r.RuleSetNames))
def names(runtime: RuntimeDep, caller: Reader) -> dict[str, Any]:
    """qconf -srqsl."""
    return {"names": quotas_service.names(runtime)}


@router.get("/rqs/template", **answers(r.Text))
def template(runtime: RuntimeDep, caller: Admin, name: str | None = None) -> dict[str, Any]:
    """What qconf -arqs [name] opens in the editor."""
    return {"text": quotas_service.template(name)}


@router.post("/rqs", **answers(r.Messages, 409))
def add(body: RuleSetText, runtime: RuntimeDep, now: NowDep, caller: Admin) -> dict[str, Any]:
    """qconf -arqs / -Arqs."""
    return {"messages": quotas_service.add(runtime, caller, body.text, now, source=body.source)}


@router.put("/rqs", **answers(r.Messages, 404, 409))
def modify(body: RuleSetText, runtime: RuntimeDep, now: NowDep, caller: Admin) -> dict[str, Any]:
    """qconf -mrqs / -Mrqs."""
    return {"messages": quotas_service.modify(runtime, caller, body.text, now, body.name, source=body.source)}


@router.delete("/rqs", **answers(r.Messages, 404, 409))
def delete(runtime: RuntimeDep, now: NowDep, caller: Admin, names: str | None = None) -> dict[str, Any]:
    """qconf -drqs [names]: the named sets, or all."""
    return {"messages": quotas_service.delete(runtime, caller, _names(names), now)}


@router.post("/rqs/attributes", **answers(r.Messages, 404, 409))
def change_attribute(body: AttributeChange, runtime: RuntimeDep, now: NowDep, caller: Admin) -> dict[str, Any]:
    return {"messages": quotas_service.change_attribute(runtime, caller, body.switch, body.attribute, body.value,
                                                        body.target, now)}


@router.get("/quotas", **answers(list[r.QuotaUsage]))
def usage(runtime: RuntimeDep, caller: People,
          users: Annotated[list[str], Query()] = [], projects: Annotated[list[str], Query()] = [],  # noqa: B006
          pes: Annotated[list[str], Query()] = [], queues: Annotated[list[str], Query()] = [],  # noqa: B006
          hosts: Annotated[list[str], Query()] = [], resources: Annotated[list[str], Query()] = [],  # noqa: B006
          ) -> list[dict[str, Any]]:
    """qquota: usage of every rule instance the selection matches (users: the caller by default)."""
    selections = {"users": users, "projects": projects, "pes": pes, "queues": queues, "hosts": hosts}
    return quotas_service.usage_report(runtime, caller, selections, resources)
