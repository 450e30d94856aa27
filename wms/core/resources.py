"""The Resources helper: parameters of Sites, CEs and Queues (SPEC 002).

SPEC 002 (DIRAC RFC #7), "Resources description": every level of the
resource tree (Site, Computing Element, Queue) may carry arbitrary
parameters, valid for every VO or for one VO only. A queue inherits what
its CE and its site say, a CE what its site says, and the more specific
statement wins. INTERFACE.md ("Configuration directory") fixes the order,
from strongest to weakest:

    queue VO  >  queue  >  CE VO  >  CE  >  site VO  >  site

A value is replaced, never merged: a queue's ``SoftwareTag`` list replaces
the site's VO-specific ``SoftwareTag`` list (this answers the open
question of examples.md J2; docs/configuration.md says so too).

Parameter names are matched without regard to case, as ClassAd attribute
names are, but they are reported with the casing the administrator wrote
at the level whose value won.

The helper is pure: it takes the already validated ``Sites`` tree (plain
dicts, as ``wms.config`` loads it) and precomputes every effective
parameter set once, so that selecting queues for a batch of submissions
costs only dictionary look-ups.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from wms.core.errors import InvalidInput, NotFound

# Keys that shape the tree and are never parameters.
VO_KEY = "VO"
CES_KEY = "CEs"
QUEUES_KEY = "Queues"
STRUCTURAL_KEYS = frozenset({VO_KEY, CES_KEY, QUEUES_KEY})

# Levels accepted by Resources.get_eligible_nodes.
LEVELS = ("Site", "CE", "Queue")


@dataclass(frozen=True, order=True, slots=True)
class QueueRef:
    """One queue, named ``Site/CE/Queue`` (INTERFACE.md, "Configuration
    directory": a queue's full name). Ordered by site, then CE, then queue.
    """

    site: str
    ce: str
    queue: str

    @property
    def name(self) -> str:
        return f"{self.site}/{self.ce}/{self.queue}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> QueueRef:
        """Read ``Site/CE/Queue``; refuse anything else with InvalidInput."""
        if not isinstance(text, str):
            raise InvalidInput(f"a queue name must be a string 'Site/CE/Queue', got {text!r}")
        parts = text.split("/")
        if len(parts) != 3 or any(not p.strip() for p in parts):
            raise InvalidInput(
                f"a queue name has the form Site/CE/Queue (three non-empty parts), got {text!r}"
            )
        site, ce, queue = (p.strip() for p in parts)
        return cls(site, ce, queue)


class ParameterMap(Mapping[str, Any]):
    """A read-only mapping whose keys are looked up without regard to case.

    Iteration yields the names with their configured casing.
    """

    __slots__ = ("_by_fold",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._by_fold: dict[str, tuple[str, Any]] = {}
        if items:
            for name, value in items.items():
                self._by_fold[name.casefold()] = (name, value)

    @classmethod
    def _from_folded(cls, by_fold: dict[str, tuple[str, Any]]) -> ParameterMap:
        new = cls.__new__(cls)
        new._by_fold = by_fold
        return new

    def __getitem__(self, key: str) -> Any:
        return self._by_fold[key.casefold()][1]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.casefold() in self._by_fold

    def get(self, key: str, default: Any = None) -> Any:
        entry = self._by_fold.get(key.casefold())
        return default if entry is None else entry[1]

    def lookup(self, key: str) -> tuple[str, Any] | None:
        """``(configured name, value)`` for ``key`` in any casing, or None."""
        return self._by_fold.get(key.casefold())

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._by_fold.values())

    def __len__(self) -> int:
        return len(self._by_fold)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict copy (lists and mappings copied one level deep)."""
        return {name: _copy_value(value) for name, value in self._by_fold.values()}

    def __repr__(self) -> str:
        return f"ParameterMap({self.to_dict()!r})"


def _copy_value(value: Any) -> Any:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _own_parameters(node: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """The parameters written directly on one node, keyed by folded name."""
    return {
        name.casefold(): (name, value)
        for name, value in node.items()
        if name not in STRUCTURAL_KEYS
    }


def _vo_parameters(node: Mapping[str, Any], vo: str | None) -> dict[str, tuple[str, Any]]:
    """The parameters a node states for ``vo`` only (none when vo is None)."""
    if vo is None:
        return {}
    blocks = node.get(VO_KEY) or {}
    block = blocks.get(vo)
    if not block:
        return {}
    return {name.casefold(): (name, value) for name, value in block.items()}


def _layer(
    base: dict[str, tuple[str, Any]], *overrides: dict[str, tuple[str, Any]]
) -> dict[str, tuple[str, Any]]:
    """Later mappings win over earlier ones, name by name (SPEC 002 inheritance)."""
    merged = dict(base)
    for override in overrides:
        merged.update(override)
    return merged


def equality_keys(value: Any) -> tuple[Any, ...]:
    """Keys under which a scalar compares equal to another.

    Strings compare exactly (case-sensitive, no numeric reading: "1.10" is
    not "1.1"); numbers compare by value (4000 == 4000.0); a number also
    equals the string of its plain decimal spelling ("4000", "1.5"), since
    YAML and JDL may spell the same tag either way. Booleans equal only
    booleans.
    """
    if isinstance(value, bool):
        return (("b", value),)
    if isinstance(value, (int, float)):
        number = float(value)
        if number.is_integer():
            return (("n", number), ("s", str(int(number))))
        return (("n", number), ("s", repr(number)))
    if isinstance(value, str):
        return (("s", value),)
    return (("o", repr(value)),)


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


def _selected(params: ParameterMap, select: Mapping[str, Any] | None) -> bool:
    """True when ``params`` satisfy a select dict (parameter -> value or
    list of acceptable values). A node lacking a selected parameter is not
    selected; a node list value is selected when any of its items is
    acceptable.
    """
    if not select:
        return True
    for key, wanted in select.items():
        entry = params.lookup(key)
        if entry is None:
            return False
        acceptable = {key for v in _as_list(wanted) for key in equality_keys(v)}
        offered = entry[1]
        if isinstance(offered, dict):
            return False
        if not any(
            key in acceptable for v in _as_list(offered) for key in equality_keys(v)
        ):
            return False
    return True


class Resources:
    """The resource tree of SPEC 002 seen by one VO (or by none).

    ``sites_tree`` is the content of the ``Sites`` mapping of
    resources.yaml: ``{site: {param: value, VO: {vo: {...}}, CEs: {ce:
    {..., Queues: {queue: {...}}}}}}``. With ``vo=None`` only the
    parameters valid for every VO are seen; with a VO name, that VO's
    blocks are layered on top and other VOs' blocks stay invisible.
    """

    def __init__(self, sites_tree: Mapping[str, Any], vo: str | None = None) -> None:
        self.vo = vo
        self._site: dict[str, ParameterMap] = {}
        self._ce: dict[tuple[str, str], ParameterMap] = {}
        self._queue: dict[QueueRef, ParameterMap] = {}
        self._ces_of: dict[str, list[str]] = {}
        self._queues_of: dict[tuple[str, str], list[QueueRef]] = {}
        for site_name in sorted(sites_tree):
            site = sites_tree[site_name] or {}
            site_eff = _layer(_own_parameters(site), _vo_parameters(site, vo))
            site_eff["site"] = ("Site", site_name)
            self._site[site_name] = ParameterMap._from_folded(site_eff)
            ces = site.get(CES_KEY) or {}
            self._ces_of[site_name] = sorted(ces)
            for ce_name in sorted(ces):
                ce = ces[ce_name] or {}
                ce_eff = _layer(site_eff, _own_parameters(ce), _vo_parameters(ce, vo))
                ce_eff["site"] = ("Site", site_name)
                ce_eff["ce"] = ("CE", ce_name)
                self._ce[(site_name, ce_name)] = ParameterMap._from_folded(ce_eff)
                queues = ce.get(QUEUES_KEY) or {}
                refs: list[QueueRef] = []
                for queue_name in sorted(queues):
                    queue = queues[queue_name] or {}
                    q_eff = _layer(ce_eff, _own_parameters(queue), _vo_parameters(queue, vo))
                    q_eff["site"] = ("Site", site_name)
                    q_eff["ce"] = ("CE", ce_name)
                    q_eff["queue"] = ("Queue", queue_name)
                    ref = QueueRef(site_name, ce_name, queue_name)
                    self._queue[ref] = ParameterMap._from_folded(q_eff)
                    refs.append(ref)
                self._queues_of[(site_name, ce_name)] = refs
        self._queue_list = sorted(self._queue)

    # -- listing ---------------------------------------------------------
    def sites(self) -> list[str]:
        return list(self._site)

    def ces(self, site: str) -> list[str]:
        self._check_site(site)
        return list(self._ces_of[site])

    def queues(self) -> list[QueueRef]:
        """Every queue of the tree, sorted by Site, CE, Queue."""
        return list(self._queue_list)

    def has_queue(self, ref: QueueRef) -> bool:
        return ref in self._queue

    # -- effective parameters -------------------------------------------
    def queue_parameters(self, ref: QueueRef | str) -> dict[str, Any]:
        """A queue's effective parameters, in the order of INTERFACE.md, plus
        ``Site``, ``CE`` and ``Queue``."""
        return self.queue_parameter_map(ref).to_dict()

    def queue_parameter_map(self, ref: QueueRef | str) -> ParameterMap:
        """The precomputed, case-insensitive, read-only view of a queue's
        effective parameters (no copy; do not hold on to inner lists)."""
        if isinstance(ref, str):
            ref = QueueRef.parse(ref)
        try:
            return self._queue[ref]
        except KeyError:
            raise NotFound(f"unknown queue {ref.name!r}") from None

    def queue_items(self) -> Iterator[tuple[QueueRef, ParameterMap]]:
        """``(ref, effective parameters)`` for every queue, sorted."""
        for ref in self._queue_list:
            yield ref, self._queue[ref]

    # -- selection (RFC #7 getEligibleNodes) -----------------------------
    def get_eligible_nodes(
        self,
        level: str = "Queue",
        ce_select: Mapping[str, Any] | None = None,
        queue_select: Mapping[str, Any] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """The nodes matching select dicts, as a tree from the Site level
        down to ``level`` (SPEC 002, "getEligibleNodes").

        A select dict maps a parameter name (any casing) to a value or a
        list of acceptable values. A CE must satisfy ``ce_select`` with its
        effective CE parameters; a queue must satisfy ``queue_select`` with
        its effective queue parameters. Results:

        * ``"Queue"``: ``{site: {ce: {queue: params}}}``, only queues of
          selected CEs that satisfy ``queue_select``;
        * ``"CE"``: ``{site: {ce: params}}``, the selected CEs; when
          ``queue_select`` is given a CE must also hold a selected queue;
        * ``"Site"``: ``{site: params}``, the sites holding a CE as above;
          with neither select dict, every site (even one without CEs).

        Sites and CEs left with nothing under them are left out.
        """
        if level not in LEVELS:
            raise InvalidInput(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
        if level == "Site" and not ce_select and not queue_select:
            return {site: params.to_dict() for site, params in self._site.items()}
        result: dict[str, dict[str, Any]] = {}
        for site in self._site:
            site_out: dict[str, Any] = {}
            for ce in self._ces_of[site]:
                ce_params = self._ce[(site, ce)]
                if not _selected(ce_params, ce_select):
                    continue
                if level != "Queue" and not queue_select:
                    site_out[ce] = ce_params.to_dict()
                    continue
                queues_out: dict[str, Any] = {}
                for ref in self._queues_of[(site, ce)]:
                    q_params = self._queue[ref]
                    if _selected(q_params, queue_select):
                        queues_out[ref.queue] = q_params.to_dict() if level == "Queue" else None
                if not queues_out:
                    continue
                site_out[ce] = queues_out if level == "Queue" else ce_params.to_dict()
            if site_out:
                result[site] = self._site[site].to_dict() if level == "Site" else site_out
        return result

    # -- helpers ----------------------------------------------------------
    def _check_site(self, site: str) -> None:
        if site not in self._site:
            raise NotFound(f"unknown site {site!r}")
