"""What a match decision reads: the pilot's request, its queue, the three
Grid Engine levels' values and the usage snapshot (built once per request,
the PreFilter idea), and each candidate task queue's parsed content (built
once per task queue and reused for every request).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from wms.core.complexes import Complex, ComplexTable
from wms.core.offers import LevelValues
from wms.core.resources import ParameterMap, QueueRef, Resources
from wms.core.task_queues import TaskQueueDefinition
from wms.core.scopes import GLOBAL_SCOPE, host_scope, queue_scope  # noqa: F401  (the levels' scopes)

if TYPE_CHECKING:       # the layers that read these import this module
    from wms.core.match.pools import PoolRules
    from wms.core.match.quotas import QuotaRequest
    from wms.core.match.reservations import Snapshot


#: The names a pilot's description adds to its queue's ad besides its load
#: values (:meth:`PilotRequest.ad`): what a Requirements expression may read
#: of the pilot.
PILOT_AD_NAMES = ("Host", "HostName", "FreeSlots", "PilotId", "Platform", "CPUTimeLeft", "PilotTags")


@dataclass(frozen=True)
class PilotRequest:
    """What a pilot says about itself when it asks for a job (specs/002, DIRAC's resource description)."""

    site: str
    ce: str
    queue: str
    host: str
    pilot_id: str
    pools: tuple[str, ...] | None = None
    slots: int = 1
    load: Mapping[str, Any] = field(default_factory=dict)
    platform: str | None = None
    cpu_time_left: float | None = None
    tags: tuple[str, ...] = ()
    # Only jobs of this VO (a VO's pilot); None: any VO.
    vo: str | None = None
    # Only jobs of this user (a pilot that cannot isolate its payloads); None: anyone's.
    owner: str | None = None
    # The slots the caller's pilot token declared: its claims never hold
    # more at once (core/match/pilot_slots.py); None: no cap.
    declared_slots: int | None = None

    @property
    def ref(self) -> QueueRef:
        return QueueRef(self.site, self.ce, self.queue)

    def ad(self) -> dict[str, Any]:
        """The pilot's description as ClassAd attributes (joined with the queue's ad)."""
        out: dict[str, Any] = {k: v for k, v in self.load.items() if isinstance(v, (int, float, str, bool))}
        out.update(Host=self.host, HostName=self.host, FreeSlots=self.slots, PilotId=self.pilot_id)
        if self.platform is not None:
            out["Platform"] = self.platform
        if self.cpu_time_left is not None:
            out["CPUTimeLeft"] = self.cpu_time_left
        if self.tags:
            out["PilotTags"] = list(self.tags)
        return out


@dataclass
class MatchContext:
    """Everything about one pilot request, computed once and read by every layer."""

    request: PilotRequest
    # The global, host and queue levels, values parsed in their types.
    levels: tuple[LevelValues, ...]
    # (scope, resource) -> amount in use, read once per request.
    usage: dict[tuple[str, str], float]
    complexes: ComplexTable
    pilot_ad: dict[str, Any]
    # The Resources view of a VO (queue parameters may differ per VO).
    resources_for: Callable[[str | None], Resources]
    # The active advance reservations (core/match/reservations.Snapshot), or
    # None when there are none: the reservation layer then costs nothing.
    reservations: Snapshot | None = None
    # The enabled resource quota sets for this request (match/quotas.py), None when there are none.
    quotas: QuotaRequest | None = None
    # The version of the stored resource quota sets ``quotas`` comes from:
    # the claim is refused when it is no longer the stored one.
    rules_version: int = 0
    # (scope, resource) -> ids of some jobs holding it, read with the usage
    # (``wms why`` names the jobs in the way of an exclusive complex).
    holders: Mapping[tuple[str, str], list[int]] = field(default_factory=dict)
    # Seconds of CPU a job's expression may take against this queue and pilot
    # (limits.evaluation_ms; wms.core.evaluation).
    evaluation_limit: float = 0.005
    # The requirements of the pools a denial may name (match/pools.py), for
    # the judgements that say why a queue is not in a pool; None elsewhere.
    pool_rules: PoolRules | None = None
    _queue_params: dict[str | None, ParameterMap] = field(default_factory=dict)

    @property
    def without_pilot(self) -> bool:
        """Judged for a queue with no pilot asking (``wms why``, the SiteDirector):
        the host and what the pilot reports are decided when one asks."""
        return not self.request.host

    def without_the_pilot(self) -> "MatchContext":
        """This context as the queue alone sees it: no host, none of the
        pilot's values. What the static phase decides must hold for every
        pilot of the queue, so it is judged here."""
        if self.without_pilot:
            return self
        request = dataclasses.replace(self.request, host="", load={}, platform=None, cpu_time_left=None, tags=())
        levels = tuple(LevelValues(lv.level, {}, {"slots": request.slots}) if lv.level == "host" else lv
                       for lv in self.levels)
        return dataclasses.replace(self, request=request, levels=levels, pilot_ad={}, usage={}, holders={})

    def queue_params(self, vo: str | None) -> ParameterMap:
        params = self._queue_params.get(vo)
        if params is None:
            params = self._queue_params[vo] = self.resources_for(vo).queue_parameter_map(self.request.ref)
        return params

    def queue_ad(self, vo: str | None) -> dict[str, Any]:
        """The queue's parameters as a ClassAd record (what `other.` sees)."""
        return {name: value for name, value in self.queue_params(vo).items() if not isinstance(value, dict)}


def with_free_slots(ctx: MatchContext, free: int) -> MatchContext:
    """``ctx`` as a request of the same pilot with ``free`` slots would see it:
    the host level's slots and the pilot's FreeSlots (a batch's later jobs
    are offered the slots the ones before them left)."""
    request = dataclasses.replace(ctx.request, slots=free)
    levels = tuple(dataclasses.replace(lv, load={**lv.load, "slots": free}) if lv.level == "host" else lv
                   for lv in ctx.levels)
    return dataclasses.replace(ctx, request=request, levels=levels, pilot_ad={**ctx.pilot_ad, "FreeSlots": free})


@dataclass(frozen=True)
class TaskQueueView:
    """A task queue as the Matcher uses it: its definition with the
    requests parsed against the complex table; built once per task queue."""

    # 0 for a definition not stored yet (the submission's feasibility check).
    tq_id: int
    priority: int
    definition: TaskQueueDefinition
    # Parsed hard and soft requests: complex name -> value in its type.
    hard: Mapping[str, Any]
    soft: Mapping[str, Any]
    # What the job is checked and charged for: (complex, requested or None
    # for a consumable's default), computed once with the view.
    charged: tuple[tuple[Complex, Any], ...] = ()
    # Why the stored definition or its requests cannot be matched (the
    # complex table changed since it was stored, say): no queue takes it.
    invalid: str | None = None

    @property
    def vo(self) -> str:
        return self.definition.vo

    @property
    def owner(self) -> str:
        return self.definition.owner

    @property
    def owner_group(self) -> str:
        return self.definition.owner_group

    @property
    def submit_pool(self) -> str | None:
        return self.definition.submit_pool

    @property
    def slots(self) -> int:
        return self.definition.slots
