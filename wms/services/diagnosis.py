"""Why a job waits (`wms why`) and what each queue holds (`wms queues`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from wms.core import holds as hold_rules
from wms.core.complexes import ComplexTable, Relop, format_value
from wms.core.identity import Identity
from wms.core.match import framework, levels
from wms.core.scopes import GLOBAL_SCOPE, host_scope, inside_reservation, queue_scope
from wms.core.match.framework import LAYERS
from wms.core.match.pools import LAYER as POOLS
from wms.core.match.pools import REASON_POOL, PoolRules
from wms.core.match.quotas import QUOTA
from wms.core.match.verdict import Code, Verdict
from wms.core.states import JobStatus
from wms.db.engine import reading
from wms.db import holds as holds_db
from wms.db import matching as match_db
from wms.db import pools as pools_db
from wms.services import access
from wms.services import jobs as jobs_service
from wms.services import pools as pools_service
from wms.services.matcher import queue_context, task_queue_views
from wms.services import reservations as reservations_service
from wms.services import quotas as quotas_service
from wms.services.runtime import Runtime

ELIGIBLE = "eligible: waiting for a pilot of this queue"
QUOTA_REASON = "cannot run in queue {queue} because it {reason}"


def why(runtime: Runtime, identity: Identity, job_id: int, now: datetime) -> dict[str, Any]:
    """Every queue of the job's VO and the first layer that keeps the job from it."""
    [row] = jobs_service.visible_jobs(runtime, identity, [job_id], access.WHY)
    out: dict[str, Any] = {"JobID": job_id, "Status": row["status"], "MinorStatus": row["minor_status"], "Queues": []}
    if row["status"] == JobStatus.HELD:
        # out of matching until released: each hold, who set it and why
        with reading(runtime.engine) as conn:
            found = holds_db.holds_of(conn, [job_id]).get(job_id, [])
        out["Holds"] = [{"Type": h.hold_type.value, "Holder": h.holder, "Reason": h.reason,
                         "Time": h.time.isoformat()} for h in sorted(found, key=lambda h: hold_rules.ORDER.index(h.hold_type))]
        out["Summary"] = (f"job {job_id} is Held, it is not matched: {row['minor_status']} "
                          f"({hold_rules.how_to_release(found)})")
        return out
    if row["status"] != JobStatus.WAITING or row["task_queue_id"] is None:
        where = f" on {row['queue']}" if row["queue"] else ""
        out["Summary"] = f"job {job_id} is {row['status']}{where}: it does not wait"
        return out
    with reading(runtime.engine) as conn:
        tq = task_queue_views(runtime, conn, [row["task_queue_id"]])[row["task_queue_id"]]
        pool_queues, pool_rules = None, None
        if tq.submit_pool is not None:
            pool = pools_db.get_pool(conn, tq.submit_pool)
            pool_queues = {"/".join(q) for q in pool["queues"]} if pool else set()
            if pool:
                pool_rules = PoolRules({tq.submit_pool: json.loads(pool["requirements"])},
                                       runtime.config.parameter_types)
        usage = match_db.all_usage(conn)
        table = runtime.read_stored_complexes()
        holders = {key: match_db.holders(conn, *key) for key, used in usage.items()
                   if used > 0 and _exclusive_row(table, key[1])}
    eligible = 0
    snapshot = reservations_service.snapshot(runtime, now)
    for ref in runtime.resources_for(tq.vo).queues():
        # No pilot yet: the host is unknown and is judged when one asks.
        # The queue serves the job's pool if the pool lists the queue.
        served = None if pool_queues is None else (tq.submit_pool,) if ref.name in pool_queues else ()
        ctx = queue_context(runtime, ref, served, slots=tq.slots, usage=usage, reservations=snapshot,
                            quotas=quotas_service.for_request(runtime, usage), holders=holders,
                            pool_rules=pool_rules)
        diagnosis = framework.evaluate(LAYERS, ctx, tq, stop_at_first=False)
        entry = {"Queue": ref.name, "Layer": "", "Code": Code.OK.value, "Reason": ELIGIBLE, "ReasonCode": ""}
        if not diagnosis.allowed:
            verdict = diagnosis.verdict
            reason = _reason(runtime, ref.name, verdict, diagnosis.denials())
            entry.update(Layer=verdict.layer, Code=verdict.code.value, ReasonCode=verdict.reason_code,
                         Reason=reason)
        eligible += entry["Code"] == Code.OK.value
        out["Queues"].append(entry)
    out["Summary"] = (f"{eligible} of {len(out['Queues'])} queues could run job {job_id} now; "
                      "the host level is judged when a pilot asks" if eligible
                      else f"no queue can run job {job_id} now")
    return out


def _reason(runtime: Runtime, queue: str, verdict: Verdict, denials: list[Verdict]) -> str:
    """The deciding layer's reason as ``wms why`` shows it. A queue outside the
    job's SubmitPool was left out when the pool was computed: the pool's own
    rule says why (in the verdict), or else the next layer that denies, or
    else the map is older than the queue."""
    if verdict.layer == QUOTA:
        return QUOTA_REASON.format(queue=queue, reason=verdict.reason)
    if verdict.why is REASON_POOL:
        cause = next((v.reason for v in denials if v.layer != POOLS), None)
        return f"{verdict.reason}: {cause if cause is not None else _stale_map(runtime)}"
    return verdict.reason


def _stale_map(runtime: Runtime) -> str:
    """Why a queue nothing rules out is missing from the job's pool: the map
    was computed before the queue was configured (a queue added to
    resources.yaml waits for the next refresh)."""
    stamp = pools_service.pool_map_stamp(runtime)
    when = f"last refreshed at {stamp['refreshed']}" if stamp else "not refreshed since the pools were made"
    other = (", from another configuration than this server's"
             if stamp and stamp.get("fingerprint") != runtime.config.pool_map_fingerprint else "")
    return (f"the SubmitPool map was {when}{other}; the agents refresh it when they start and every "
            "submit_pool_refresh seconds, `wms admin pools refresh` at once")


def _exclusive_row(table: ComplexTable, resource: str) -> bool:
    """A usage row of an EXCL complex or of its job count."""
    cx = table.get(resource.removesuffix(levels.JOBS_SUFFIX))
    return cx is not None and cx.relop is Relop.EXCL


def queues_overview(runtime: Runtime) -> list[dict[str, Any]]:
    """Per queue, configured host and the global level: reserved/used/total slots and every consumable (qstat -f)."""
    table = runtime.read_stored_complexes()
    with reading(runtime.engine) as conn:
        usage = match_db.all_usage(conn)
    # A running reservation holds its slots in the usage rows and its jobs
    # use the rows "ar:<id>|<scope>": shown as resv, and its jobs as used.
    reserved = reservations_service.reserved_slots(runtime)
    inside: dict[str, float] = {}
    for (scope, resource), amount in usage.items():
        reserved_at = inside_reservation(scope)
        if reserved_at is not None and resource == "slots":
            inside[reserved_at[1]] = inside.get(reserved_at[1], 0.0) + amount
    rows = []

    def row(kind: str, name: str, scope: str, values: dict[str, Any]) -> dict[str, Any]:
        # Numbers for programs ("Slots", "Usage"), the qstat -f cells for people ("resv/used/tot", "Consumables").
        consumables: dict[str, str] = {}
        usage_of: dict[str, dict[str, Any]] = {}
        slots: dict[str, int] | None = None
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
                usage_of[cx.name] = {"exclusive": bool(used), "jobs": int(others), "offered": bool(capacity)}
            elif cx.name == "slots":
                resv = reserved.get(scope, 0.0)
                slots = {"reserved": int(resv), "used": int(used - resv + inside.get(scope, 0.0)),
                         "total": int(capacity)}
            else:
                consumables[cx.name] = f"{format_value(cx, used)}/{format_value(cx, capacity)}"
                usage_of[cx.name] = {"used": used, "total": capacity}
        shown = f"{slots['reserved']}/{slots['used']}/{slots['total']}" if slots else "0/0/-"
        return {"Kind": kind, "Name": name, "Slots": slots, "Usage": usage_of, "resv/used/tot": shown,
                "Consumables": consumables}

    rows.append(row("global", "global", GLOBAL_SCOPE, dict(runtime.config.cluster.global_.complex_values)))
    resources = runtime.resources_for(None)
    for ref in resources.queues():
        params = resources.queue_parameters(ref)
        values = dict(params.get("complex_values") or {})
        rows.append({**row("queue", ref.name, queue_scope(ref), values), "Parameters": params})
    for host in sorted(h for h in runtime.config.cluster.hosts if not h.startswith("@")):
        rows.append(row("host", host, host_scope(host), levels.host_configuration(runtime.config.cluster, host)))
    return rows
