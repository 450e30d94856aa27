"""Job Requirements sections, SubmitPools and eligible queues (SPEC 002).

SPEC 002 (DIRAC RFC #7) lets a job ask for any resource parameter in a
``Requirements = [ ... ]`` record. This module holds every rule of that
spec that concerns the requirements themselves:

* "Job requirements" / "Optimizers": the requirements are put in a
  canonical order and form, and the SubmitPool identifier is a hash of
  that form, so the same requirements always give the same pool
  (:func:`canonical_requirements`, :func:`submit_pool_id`);
* "Job requirements" (the three matching rules): a parameter the resource
  does not describe makes it ineligible; a list in the job means "any of";
  a number is a capacity the resource must offer at least; the parameter
  type comes from the JobDescription section of the Operations
  configuration (:func:`check_queue`);
* "Optimizers": the eligible queues and sites of a pool
  (:func:`eligible_queues`, :func:`eligible_sites`).

Where the spec is silent we decided (docs/configuration.md repeats it):
strings compare case-sensitively; a resource list offers every value in
it; list items in a job are sorted, so their order never changes the pool;
a number-type parameter takes exactly one value.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from wms.core.errors import InvalidInput
from wms.core.resources import ParameterMap, QueueRef, Resources, equality_keys

NUMBER = "number"
STRING = "string"
LIST = "list"
PARAMETER_TYPES = (NUMBER, STRING, LIST)
# The type inferred for an undescribed boolean value: compared for equality.
BOOLEAN = "boolean"

# A pool identifier is this many hex digits of the SHA-256 digest.
POOL_ID_LENGTH = 16


# -- values ----------------------------------------------------------------
def normalise_number(value: int | float) -> int | float:
    """4000.0 -> 4000; 1.5 stays 1.5."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def parse_number(value: Any) -> int | float:
    """A number from an int, a float or a numeric string; ValueError with a
    short message (``expected a number, got 'lots'``) otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        number: int | float = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"expected a number, got {value!r}") from None
    else:
        raise ValueError(f"expected a number, got {_describe(value)}")
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r}")
    return normalise_number(number)


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a nested record"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "a list"
    return repr(value)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, value)


def normalise_type_name(name: str) -> str:
    """``Number`` -> ``number``; ValueError for anything outside the three types."""
    folded = str(name).strip().casefold()
    if folded not in PARAMETER_TYPES:
        raise ValueError(f"a parameter type is one of {', '.join(PARAMETER_TYPES)}, got {name!r}")
    return folded


def fold_types(types: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``{folded name: (configured name, type)}`` for case-insensitive look-up."""
    return {name.casefold(): (name, normalise_type_name(kind)) for name, kind in types.items()}


def infer_type(value: Any) -> str:
    """The type of an undescribed parameter, read from its value."""
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, (int, float)):
        return NUMBER
    if isinstance(value, (list, tuple)):
        return LIST
    return STRING


def normalise_resource_value(value: Any, kind: str | None) -> Any:
    """Check and normalise one parameter value written on a resource.

    ``kind`` is the declared type (or None). A number-type parameter takes
    one number (numeric strings are read as numbers); a string-type one a
    string or a list of strings (the resource then offers each of them); a
    list-type one a scalar or a list of scalars. Undeclared parameters take
    a scalar or a non-empty list of scalars. Raises ValueError.
    """
    if value is None:
        raise ValueError("no value given")
    if isinstance(value, Mapping):
        raise ValueError("expected a value or a list of values, got a mapping")
    if isinstance(value, list):
        if not value:
            raise ValueError("an empty list offers nothing; leave the parameter out instead")
        for item in value:
            if not _is_scalar(item):
                raise ValueError(f"a list holds plain values only, got {_describe(item)}")
    if kind == NUMBER:
        if isinstance(value, list):
            raise ValueError(
                "expected a number, got a list: a number-type parameter is one capacity"
            )
        return parse_number(value)
    if kind == STRING:
        for item in _as_list(value):
            if not isinstance(item, str):
                raise ValueError(f"expected a string, got {item!r} (quote it)")
        return value
    return value


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]


# -- canonical form --------------------------------------------------------
def _canonical_item(name: str, value: Any) -> Any:
    """One list item: stripped string, normalised number or boolean."""
    if isinstance(value, Mapping):
        raise InvalidInput("nested records are not allowed in Requirements", where=name)
    if isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidInput("a list item cannot itself be a list", where=name)
    if value is None:
        raise InvalidInput("a list item has no value", where=name)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        try:
            return parse_number(value)
        except ValueError as exc:
            raise InvalidInput(str(exc), where=name) from None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise InvalidInput("empty string in a list", where=name)
        return text
    raise InvalidInput(f"unsupported value {value!r}", where=name)


def _canonical_list(name: str, value: Any) -> list[Any]:
    items = _as_list(value)
    if not items:
        raise InvalidInput("an empty list asks for nothing; leave the parameter out", where=name)
    unique: dict[Any, Any] = {}
    for raw in items:
        item = _canonical_item(name, raw)
        key = (type(item) is bool, item) if not isinstance(item, str) else (None, item)
        unique.setdefault(key, item)
    return sorted(unique.values(), key=_sort_key)


def canonical_requirements(req: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
    """The canonical form of a Requirements record (SPEC 002, "the job
    requirements are ordered ... and a unique hash is created").

    Keys are case-folded and sorted; strings stripped; list items stripped,
    made unique and sorted; numbers normalised (4000, 4000.0 and "4000"
    for a number-type parameter all give 4000); a list-type parameter is
    always a list (a scalar is a one-item list); a one-item list of a
    string-type parameter is that string. ``types`` maps parameter names
    (any casing) to ``number``/``string``/``list``; an undescribed
    parameter takes its type from the value. Anything that does not fit
    raises InvalidInput with ``where="Requirements.<Name>"``.
    """
    if not isinstance(req, Mapping):
        raise InvalidInput(f"Requirements must be a record, got {_describe(req)}", where="Requirements")
    declared = fold_types(types)
    out: dict[str, Any] = {}
    seen_as: dict[str, str] = {}
    for raw_name, value in req.items():
        if not isinstance(raw_name, str) or not raw_name.strip():
            raise InvalidInput(f"a parameter name must be a non-empty string, got {raw_name!r}",
                               where="Requirements")
        name = raw_name.strip()
        where = f"Requirements.{name}"
        key = name.casefold()
        if key in seen_as:
            raise InvalidInput(f"given twice (as {seen_as[key]!r} and {name!r})", where=where)
        seen_as[key] = name
        if value is None:
            raise InvalidInput("no value given", where=where)
        if isinstance(value, Mapping):
            raise InvalidInput("nested records are not allowed in Requirements", where=where)
        kind = declared[key][1] if key in declared else infer_type(value)
        if kind == NUMBER:
            if isinstance(value, (list, tuple, set, frozenset)):
                raise InvalidInput(
                    "expected a number, got a list: a number is the least capacity the queue "
                    "must offer, so only one value makes sense",
                    where=where,
                )
            try:
                out[key] = parse_number(value)
            except ValueError as exc:
                raise InvalidInput(str(exc), where=where) from None
        elif kind == LIST:
            out[key] = _canonical_list(where, value)
        elif kind == STRING:
            if isinstance(value, (list, tuple, set, frozenset)):
                items = _canonical_list(where, value)
                for item in items:
                    if not isinstance(item, str):
                        raise InvalidInput(f"expected a string, got {item!r}", where=where)
                out[key] = items[0] if len(items) == 1 else items
            else:
                if not isinstance(value, str):
                    raise InvalidInput(f"expected a string, got {value!r}", where=where)
                text = value.strip()
                if not text:
                    raise InvalidInput("empty string", where=where)
                out[key] = text
        else:  # BOOLEAN, inferred
            out[key] = bool(value)
    return {key: out[key] for key in sorted(out)}


def submit_pool_id(canonical: Mapping[str, Any]) -> str:
    """The SubmitPool identifier (SPEC 002, "Optimizers"): the first 16 hex
    digits of the SHA-256 of the canonical requirements as compact JSON
    with sorted keys. Pass the output of :func:`canonical_requirements`.
    """
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:POOL_ID_LENGTH]


# -- matching ----------------------------------------------------------------
def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


class _Need:
    """One requirement, resolved once and checked against many queues."""

    __slots__ = ("key", "name", "kind", "value", "keys")

    def __init__(self, key: str, value: Any, declared: dict[str, tuple[str, str]]) -> None:
        self.key = key
        if key in declared:
            self.name, self.kind = declared[key]
        else:
            self.name, self.kind = key, infer_type(value)
        self.value = value
        if self.kind != NUMBER:
            self.keys = {k for item in _as_list(value) for k in equality_keys(item)}

    def check(self, params: ParameterMap) -> str | None:
        entry = params.lookup(self.key)
        if entry is None:
            return f"{self.name}: not described for this queue"
        name, offered = entry
        if self.kind == NUMBER:
            capacity: int | float | None = None
            for item in _as_list(offered):
                try:
                    number = parse_number(item)
                except ValueError:
                    continue
                capacity = number if capacity is None else max(capacity, number)
            if capacity is None:
                return f"{name}: queue value {_fmt(offered)} is not a number"
            if capacity < self.value:
                return f"{name}: queue offers {_fmt(offered)}, job needs {self.value}"
            return None
        if isinstance(offered, Mapping):
            return f"{name}: queue value is a mapping, not comparable"
        for item in _as_list(offered):
            for k in equality_keys(item):
                if k in self.keys:
                    return None
        wanted = f"one of {_fmt(self.value)}" if isinstance(self.value, list) else _fmt(self.value)
        return f"{name}: queue offers {_fmt(offered)}, job needs {wanted}"


def _needs(canonical: Mapping[str, Any], types: Mapping[str, str]) -> list[_Need]:
    declared = fold_types(types)
    return [_Need(key.casefold(), canonical[key], declared) for key in sorted(canonical)]


def check_queue(
    canonical: Mapping[str, Any], queue_params: Mapping[str, Any], types: Mapping[str, str]
) -> str | None:
    """None when a queue is eligible for the requirements, else the reason
    for the first parameter (in name order) that fails (SPEC 002, "Job
    requirements"):

    * a parameter the queue does not describe: ``CPUModel: not described
      for this queue``;
    * number: the queue's value is a capacity and must be at least the
      job's (``Memory: queue offers 2000, job needs 4000``);
    * string, list or boolean: some value the job accepts (one of its
      list, or its single value) must equal some value the queue offers
      (its single value, or any item of its list). Strings compare
      case-sensitively.
    """
    params = queue_params if isinstance(queue_params, ParameterMap) else ParameterMap(queue_params)
    for need in _needs(canonical, types):
        reason = need.check(params)
        if reason is not None:
            return reason
    return None


def eligible_queues(
    canonical: Mapping[str, Any], resources: Resources, types: Mapping[str, str]
) -> list[QueueRef]:
    """The queues of ``resources`` eligible for the requirements, sorted
    (SPEC 002, "Optimizers": the SubmitPool's queues)."""
    needs = _needs(canonical, types)
    return [
        ref
        for ref, params in resources.queue_items()
        if all(need.check(params) is None for need in needs)
    ]


def eligible_sites(queues: Iterable[QueueRef]) -> list[str]:
    """The sorted, distinct sites of some queues (SPEC 002: the eligible
    sites may be added to the job's Site parameter)."""
    return sorted({ref.site for ref in queues})
