"""Why a job waits (`wms why`) and what each queue holds (`wms queues`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wms.core.complexes import Relop, format_value
from wms.core.identity import Identity
from wms.core.match import levels
from wms.core.match.context import GLOBAL_SCOPE, MatchContext, PilotRequest, host_scope, queue_scope
from wms.core.match.quotas import QUOTA, QUOTA_LAYER
from wms.core.match.requirements import StaticRequirements
from wms.core.match.reservations import ReservationLayer
from wms.core.match.verdict import Code
from wms.core.states import JobStatus
from wms.db.engine import reading
from wms.db import matching as match_db
from wms.db import pools as pools_db
from wms.services import jobs as jobs_service
from wms.services.matcher import task_queue_views
from wms.services import complexes as complexes_service
from wms.services import reservations as reservations_service
from wms.services import quotas as quotas_service
from wms.services.runtime import Runtime

ELIGIBLE = "eligible: waiting for a pilot of this queue"
# Layers a queue is judged by without a pilot; the host level and what the
# pilot reports are decided when a pilot asks (so are quota rules on hosts).
WHY_LAYERS = (ReservationLayer(), QUOTA_LAYER, levels.LEVEL_LAYERS[0], levels.LEVEL_LAYERS[2], StaticRequirements())
QUOTA_REASON = "cannot run in queue {queue} because it {reason}"


def why(runtime: Runtime, identity: Identity, job_id: int, now: datetime) -> dict[str, Any]:
    """Every queue of the job's VO and the first layer that keeps the job from it."""
    [row] = jobs_service.visible_jobs(runtime, identity, [job_id])
    complexes_service.sync(runtime)
    out: dict[str, Any] = {"JobID": job_id, "Status": row["status"], "MinorStatus": row["minor_status"], "Queues": []}
    if row["status"] != JobStatus.WAITING or row["task_queue_id"] is None:
        where = f" on {row['queue']}" if row["queue"] else ""
        out["Summary"] = f"job {job_id} is {row['status']}{where}: it does not wait"
        return out
    with reading(runtime.engine) as conn:
        tq = task_queue_views(runtime, conn, [row["task_queue_id"]])[row["task_queue_id"]]
        pool_queues = None
        if tq.submit_pool is not None:
            pool = pools_db.get_pool(conn, tq.submit_pool)
            pool_queues = {"/".join(q) for q in pool["queues"]} if pool else set()
        usage = match_db.all_usage(conn)
        holders = {key: match_db.holders(conn, *key) for key, used in usage.items()
                   if used > 0 and _exclusive_row(runtime, key[1])}
    eligible = 0
    snapshot = reservations_service.snapshot(runtime, now)
    for ref in runtime.resources_for(tq.vo).queues():
        # No pilot yet: the host is unknown and is not judged.
        request = PilotRequest(site=ref.site, ce=ref.ce, queue=ref.queue, host="", pilot_id="why",
                               pools=None, slots=tq.slots)
        params = runtime.resources_for(None).queue_parameter_map(ref)
        ctx = MatchContext(
            request=request,
            levels=levels.build_levels(runtime.complexes, runtime.config.cluster,
                                       params.get("complex_values") or {}, request),
            usage=usage, complexes=runtime.complexes, pilot_ad={}, resources_for=runtime.resources_for,
            reservations=snapshot,
            quotas=quotas_service.for_request(runtime, usage), holders=holders,
        )
        entry = {"Queue": ref.name, "Layer": "", "Code": Code.OK.value, "Reason": ELIGIBLE}
        if pool_queues is not None and ref.name not in pool_queues:
            entry.update(Layer="requirements", Code=Code.NEVER.value, Reason="Requirements not met (not in the SubmitPool)")
        else:
            for layer in WHY_LAYERS:
                verdict = layer.check(ctx, tq)
                if not verdict.allowed:
                    reason = verdict.reason
                    if verdict.layer == QUOTA:
                        reason = QUOTA_REASON.format(queue=ref.name, reason=reason)
                    entry.update(Layer=verdict.layer or layer.name, Code=verdict.code.value, Reason=reason)
                    break
        eligible += entry["Code"] == Code.OK.value
        out["Queues"].append(entry)
    out["Summary"] = (f"{eligible} of {len(out['Queues'])} queues could run job {job_id} now; "
                      "the host level is judged when a pilot asks" if eligible
                      else f"no queue can run job {job_id} now")
    return out


def _exclusive_row(runtime: Runtime, resource: str) -> bool:
    """A usage row of an EXCL complex or of its job count."""
    cx = runtime.complexes.get(resource.removesuffix(levels.JOBS_SUFFIX))
    return cx is not None and cx.relop is Relop.EXCL


def queues_overview(runtime: Runtime) -> list[dict[str, Any]]:
    """Per queue, configured host and the global level: reserved/used/total slots and every consumable (qstat -f)."""
    complexes_service.sync(runtime)
    table = runtime.complexes
    with reading(runtime.engine) as conn:
        usage = match_db.all_usage(conn)
    # A running reservation holds its slots in the usage rows and its jobs
    # use the rows "ar:<id>|<scope>": shown as resv, and its jobs as used.
    reserved = reservations_service.reserved_slots(runtime)
    inside: dict[str, float] = {}
    for (scope, resource), amount in usage.items():
        if scope.startswith("ar:") and resource == "slots":
            inner = scope.split("|", 1)[1]
            inside[inner] = inside.get(inner, 0.0) + amount
    rows = []

    def row(kind: str, name: str, scope: str, values: dict[str, Any]) -> dict[str, Any]:
        consumables = {}
        slots = "0/0/-"
        for key, raw in sorted(values.items()):
            cx = table.get(key)
            if cx is None or not cx.is_consumable:
                continue
            capacity = levels.parse_values(table, {key: raw}, name)[cx.name]
            used = usage.get((scope, cx.name), 0.0)
            if cx.relop is Relop.EXCL:
                # Who uses the exclusive complex: an exclusive job, or how many others.
                others = usage.get((scope, levels.jobs_resource(cx.name)), 0.0)
                consumables[cx.name] = "exclusive" if used else f"{int(others)} jobs" if capacity else "not offered"
            elif cx.name == "slots":
                resv = reserved.get(scope, 0.0)
                slots = f"{int(resv)}/{int(used - resv + inside.get(scope, 0.0))}/{int(capacity)}"
            else:
                consumables[cx.name] = f"{format_value(cx, used)}/{format_value(cx, capacity)}"
        return {"Kind": kind, "Name": name, "resv/used/tot": slots, "Consumables": consumables}

    rows.append(row("global", "global", GLOBAL_SCOPE, dict(runtime.config.cluster.global_.complex_values)))
    resources = runtime.resources_for(None)
    for ref in resources.queues():
        values = dict(resources.queue_parameter_map(ref).get("complex_values") or {})
        rows.append(row("queue", ref.name, queue_scope(ref), values))
    for host in sorted(h for h in runtime.config.cluster.hosts if not h.startswith("@")):
        rows.append(row("host", host, host_scope(host), levels.host_configuration(runtime.config.cluster, host)))
    return rows
