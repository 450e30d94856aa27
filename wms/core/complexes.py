"""Complex attributes: complex(5) and SPEC 000 ("Complex Attribute Specification").

A complex attribute is a named, typed resource that jobs request
(``-l h_vmem=2G``, or ``ResourceRequests`` in a JDL) and that the global,
host and queue levels offer. This module holds, in one place:

* the definitions (complex(5) FORMAT; SPEC 000 section 1) and the built-in
  table (``qconf -sc`` on a fresh installation, sge-default-complexes.yaml);
* the rules a definition must obey (SPEC 000 section 2 "Restrictions",
  checked in the order Grid Engine checks them and reported with its
  message texts, examples.md 1.1);
* reading values by type (complex(5) "type"; units in quantities.py);
* comparing a request with an offer (complex(5) "relop": the request is
  the left operand, examples.md 1.2; strings are wildcard expressions,
  patterns.py);
* consumables (complex(5) "consumable", "default"; SPEC 000 E1/E2);
* FORCED attributes (complex(5) "requestable");
* the relops that narrow a value across levels (the overriding itself,
  global -> host -> queue, is core/offers.py's).

The ``urgency`` column is read and checked (a number) and shown by
``qconf -sc``, but orders nothing: Grid Engine adds it to a job's urgency,
and here the Matcher draws task queues by their fair-share priority
(core/shares.py).

It is pure: no I/O, no configuration loading.

Decisions where the sources disagree (examples.md section 9)
-----------------------------------------------------------
* Relops: ``!=`` exists and strings take ``==`` or ``!=`` (the code; item 5).
* STRING and RESTRING both match the request as a wildcard expression,
  as complex(5) and the code do; SPEC 000's "plain strings match only
  exactly" is not followed (item 7). CSTRING and HOST match without case.
* Consumables take ``<=``, and BOOL consumables ``EXCL`` (the code; item 10).
* A FORCED attribute is not refused at submission; a job that does not
  request it simply cannot run where a level defines it (the code; item 9,
  see :func:`forced_missing`).
* The default of every consumable is parsed when it is defined (Grid Engine
  skips YES consumables; examples.md C20 asks for always).
* A string-typed definition that is marked consumable is refused for that
  alone; the consumable-only checks (relop, default) are not also reported
  for it (examples.md C4 lists one message; C14, a BOOL, lists two).
* A consumable's default may be neither infinity nor negative (reported as
  a default of the wrong type); Grid Engine only checks values, not defaults.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from wms.core.errors import InvalidInput
from wms.core.patterns import compile_pattern
from wms.core.quantities import (
    ValueRefused,
    format_memory,
    format_number,
    format_time,
    parse_bool,
    parse_memory,
    parse_number,
    parse_time,
)
from wms.core.reasons import Reason


# -- enumerations -------------------------------------------------------------------
class ValueType(StrEnum):
    """complex(5) "type"."""

    INT = "INT"
    DOUBLE = "DOUBLE"
    MEMORY = "MEMORY"
    TIME = "TIME"
    BOOL = "BOOL"
    STRING = "STRING"
    CSTRING = "CSTRING"
    RESTRING = "RESTRING"
    HOST = "HOST"


class Relop(StrEnum):
    """complex(5) "relop"."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EXCL = "EXCL"


class Requestable(StrEnum):
    """complex(5) "requestable"."""

    YES = "YES"
    NO = "NO"
    FORCED = "FORCED"


class Consumable(StrEnum):
    """complex(5) "consumable": YES per slot, JOB once per job."""

    YES = "YES"
    JOB = "JOB"
    NO = "NO"


NUMERIC_TYPES = frozenset({ValueType.INT, ValueType.DOUBLE, ValueType.MEMORY, ValueType.TIME})
STRING_TYPES = frozenset({ValueType.STRING, ValueType.CSTRING, ValueType.RESTRING, ValueType.HOST})
# Built-ins may move freely within this family (SPEC 000 section 2, "Build in values").
STRING_FAMILY = frozenset({ValueType.STRING, ValueType.CSTRING, ValueType.RESTRING})
CASELESS_TYPES = frozenset({ValueType.CSTRING, ValueType.HOST})
# Relops whose values may only be narrowed (SPEC 000 section 3).
UPPER_BOUND_RELOPS = frozenset({Relop.LE, Relop.LT, Relop.EXCL})  # smaller offer = more restrictive
LOWER_BOUND_RELOPS = frozenset({Relop.GE, Relop.GT})  # larger offer = more restrictive

_FLAG_WORDS = {
    "requestable": {"YES": "YES", "Y": "YES", "NO": "NO", "N": "NO", "FORCED": "FORCED", "F": "FORCED"},
    "consumable": {"YES": "YES", "Y": "YES", "NO": "NO", "N": "NO", "JOB": "JOB", "J": "JOB"},
}
_COLUMNS = ("name", "shortcut", "type", "relop", "requestable", "consumable", "default", "urgency")
# Characters an object name may not contain (sge_types(1) "object_name").
_NAME_FORBIDDEN = frozenset("\n\t\r /:'\\[]{}|()@%,\"")
_NAME_MAX = 512


# -- Grid Engine's message texts (msg_sgeobjlib.h, msg_common.h) --------------------
# Each a Reason (core/reasons.py) like every other refusal: a stable code
# and Grid Engine's words, filled with the attribute's name (and its type,
# shortcut or problem) where a person reads them.
REASON_EXCL_NEEDS_BOOL = Reason("complex-excl-needs-bool",
                                'Complex "{name}" must be BOOL to use EXCL as relational operator')
REASON_INVALID_RELOP = Reason("complex-invalid-relop", 'Complex "{name}" has an invalid relational operator')
REASON_TYPE_NOT_CONSUMABLE = Reason("complex-type-not-consumable",
                                    'Complex "{name}" of type "{type}" cannot be a consumable')
REASON_EXCLUSIVE_NEEDS_EXCL = Reason("complex-exclusive-needs-excl",
                                     'Exclusive complex "{name}" must have EXCL as relational operator')
REASON_EXCLUSIVE_NOT_CONSUMABLE = Reason("complex-exclusive-not-consumable",
                                         'Exclusive complex "{name}" must be a consumable')
REASON_NOT_REQUESTABLE = Reason("complex-not-requestable", 'Complex attribute "{name}" is not requestable')
REASON_CONSUMABLE_RELOP = Reason("complex-consumable-relop",
                                 'Consumable "{name}" can have only <= as an relational operator')
REASON_DEFAULT_TYPE = Reason("complex-default-type", 'Complex "{name}"\'s default value should be of type "{type}"')
REASON_NEEDS_DEFAULT = Reason("complex-needs-default",
                              'Consumable "{name}" needs a default value because it is not requestable.')
REASON_FORCED_DEFAULT = Reason("complex-forced-default",
                               'Consumable "{name}" cannot have a default value because it is forced.')
REASON_NO_DEFAULT = Reason("complex-no-default", 'Complex "{name}" cannot have a default value')
REASON_URGENCY = Reason("complex-urgency", 'The following error occoured for complex "{name}", '
                        'while parsing the urgency value: "{problem}"')
REASON_TYPE_CHANGE = Reason("complex-type-change",
                            'The type of the complex "{name}" cannot be changed due to its built in status')
REASON_ALREADY_EXISTS = Reason("complex-exists", "complex with name {name} or shortcut {shortcut} already exists")
REASON_BUILTIN_DELETED = Reason("complex-builtin-deleted", 'built-in complex "{name}" cannot be deleted')
REASON_NON_REQUESTABLE = Reason("resource-not-requestable", 'resource "{name}" configured as non requestable')
REASON_NEGATIVE_CONSUMABLE = Reason("consumable-negative", 'attribute "{name}" is consumable but has a negative value')
REASON_INFINITE_CONSUMABLE = Reason("consumable-infinite", 'attribute "{name}" is consumable and cannot be infinity')
REASON_UNKNOWN_RESOURCE = Reason("resource-unknown", "unknown resource {name!r}")


# Words Grid Engine uses for "attribute X is not a ..." (sge_parse_num_par.c).
_VALUE_WORDS = {
    ValueType.INT: "an integer value",
    ValueType.DOUBLE: "a double value",
    ValueType.MEMORY: "a memory value",
    ValueType.TIME: "a time value",
    ValueType.BOOL: "a boolean value",
}


# -- definitions --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Complex:
    """One complex(5) definition line: ``name shortcut type relop requestable
    consumable default urgency``. ``default`` is kept as text (``NONE``,
    ``0``, ``0:0:0``, ``1``); ``builtin`` marks the attributes of the default
    table, which cannot be deleted nor change type.
    """

    name: str
    shortcut: str
    type: ValueType
    relop: Relop
    requestable: Requestable
    consumable: Consumable
    default: str
    urgency: int | float
    builtin: bool = False

    @property
    def is_consumable(self) -> bool:
        return self.consumable is not Consumable.NO

    def columns(self) -> tuple[str, ...]:
        """The eight ``qconf -sc`` columns."""
        return (
            self.name,
            self.shortcut,
            self.type.value,
            self.relop.value,
            self.requestable.value,
            self.consumable.value,
            self.default,
            format_number(self.urgency),
        )


def _builtin(name: str, shortcut: str, type_: str, relop: str, requestable: str,
             consumable: str = "NO", default: str | None = None, urgency: int = 0) -> Complex:
    vtype = ValueType(type_)
    if default is None:
        default = "NONE" if vtype in STRING_TYPES else ("0:0:0" if vtype is ValueType.TIME else "0")
    return Complex(name, shortcut, vtype, Relop(relop), Requestable(requestable),
                   Consumable(consumable), default, urgency, builtin=True)


# The default table, as `qconf -sc` prints it on a fresh Grid Engine 6.2u5
# installation (sge-default-complexes.yaml: 51 centry files plus m_thread).
BUILTIN_COMPLEXES: tuple[Complex, ...] = (
    _builtin("arch", "a", "RESTRING", "==", "YES"),
    _builtin("calendar", "c", "RESTRING", "==", "YES"),
    _builtin("cpu", "cpu", "DOUBLE", ">=", "YES"),
    _builtin("display_win_gui", "dwg", "BOOL", "==", "YES"),
    _builtin("h_core", "h_core", "MEMORY", "<=", "YES"),
    _builtin("h_cpu", "h_cpu", "TIME", "<=", "YES"),
    _builtin("h_data", "h_data", "MEMORY", "<=", "YES"),
    _builtin("h_fsize", "h_fsize", "MEMORY", "<=", "YES"),
    _builtin("h_rss", "h_rss", "MEMORY", "<=", "YES"),
    _builtin("h_rt", "h_rt", "TIME", "<=", "YES"),
    _builtin("h_stack", "h_stack", "MEMORY", "<=", "YES"),
    _builtin("h_vmem", "h_vmem", "MEMORY", "<=", "YES"),
    _builtin("hostname", "h", "HOST", "==", "YES"),
    _builtin("load_avg", "la", "DOUBLE", ">=", "NO"),
    _builtin("load_long", "ll", "DOUBLE", ">=", "NO"),
    _builtin("load_medium", "lm", "DOUBLE", ">=", "NO"),
    _builtin("load_short", "ls", "DOUBLE", ">=", "NO"),
    _builtin("m_core", "core", "INT", "<=", "YES"),
    _builtin("m_socket", "socket", "INT", "<=", "YES"),
    _builtin("m_thread", "thread", "INT", "<=", "YES"),
    _builtin("m_topology", "topo", "RESTRING", "==", "YES"),
    _builtin("m_topology_inuse", "utopo", "RESTRING", "==", "YES"),
    _builtin("mem_free", "mf", "MEMORY", "<=", "YES"),
    _builtin("mem_total", "mt", "MEMORY", "<=", "YES"),
    _builtin("mem_used", "mu", "MEMORY", ">=", "YES"),
    _builtin("min_cpu_interval", "mci", "TIME", "<=", "NO"),
    _builtin("np_load_avg", "nla", "DOUBLE", ">=", "NO"),
    _builtin("np_load_long", "nll", "DOUBLE", ">=", "NO"),
    _builtin("np_load_medium", "nlm", "DOUBLE", ">=", "NO"),
    _builtin("np_load_short", "nls", "DOUBLE", ">=", "NO"),
    _builtin("num_proc", "p", "INT", "==", "YES"),
    _builtin("qname", "q", "RESTRING", "==", "YES"),
    _builtin("rerun", "re", "BOOL", "==", "NO"),
    _builtin("s_core", "s_core", "MEMORY", "<=", "YES"),
    _builtin("s_cpu", "s_cpu", "TIME", "<=", "YES"),
    _builtin("s_data", "s_data", "MEMORY", "<=", "YES"),
    _builtin("s_fsize", "s_fsize", "MEMORY", "<=", "YES"),
    _builtin("s_rss", "s_rss", "MEMORY", "<=", "YES"),
    _builtin("s_rt", "s_rt", "TIME", "<=", "YES"),
    _builtin("s_stack", "s_stack", "MEMORY", "<=", "YES"),
    _builtin("s_vmem", "s_vmem", "MEMORY", "<=", "YES"),
    _builtin("seq_no", "seq", "INT", "==", "NO"),
    _builtin("slots", "s", "INT", "<=", "YES", consumable="YES", default="1", urgency=1000),
    _builtin("swap_free", "sf", "MEMORY", "<=", "YES"),
    _builtin("swap_rate", "sr", "MEMORY", ">=", "YES"),
    _builtin("swap_rsvd", "srsv", "MEMORY", ">=", "YES"),
    _builtin("swap_total", "st", "MEMORY", "<=", "YES"),
    _builtin("swap_used", "su", "MEMORY", ">=", "YES"),
    _builtin("tmpdir", "tmp", "RESTRING", "==", "NO"),
    _builtin("virtual_free", "vf", "MEMORY", "<=", "YES"),
    _builtin("virtual_total", "vt", "MEMORY", "<=", "YES"),
    _builtin("virtual_used", "vu", "MEMORY", ">=", "YES"),
)
BUILTIN_BY_NAME: dict[str, Complex] = {cx.name: cx for cx in BUILTIN_COMPLEXES}


class ComplexDefinitionError(InvalidInput):
    """One or more complex definitions break the complex(5) rules.

    ``problems`` holds every ``(where, message)`` found; the string form
    joins them with ``; ``.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = list(problems)
        places = {where for where, _ in problems}
        if len(places) == 1:
            super().__init__("; ".join(message for _, message in problems), where=problems[0][0])
        else:
            super().__init__("; ".join(f"{where}: {message}" for where, message in problems))


def _text(value: Any) -> str:
    """A scalar from YAML or a file as the text qconf would show."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return format_number(value)
    return str(value).strip()


def _flag(value: Any) -> str:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return _text(value).upper()


def _name_problem(column: str, value: str) -> str | None:
    if not value:
        return f"the {column} is empty"
    if len(value) > _NAME_MAX:
        return f"the {column} {value!r} is longer than {_NAME_MAX} characters"
    bad = sorted({char for char in value if char in _NAME_FORBIDDEN})
    if bad:
        return f"the {column} {value!r} contains {', '.join(repr(char) for char in bad)}"
    return None


def _coerce(entry: Complex | Mapping[str, Any]) -> tuple[Complex | None, str | None, list[str]]:
    """Turn one entry into a Complex.

    Returns (complex or None, urgency problem or None, fatal problems). A
    fatal problem (missing column, unknown keyword, bad name) leaves nothing
    to check the rules on; a bad urgency is reported among the rules, where
    Grid Engine reports it.
    """
    if isinstance(entry, Complex):
        try:
            cx = replace(entry, type=ValueType(entry.type), relop=Relop(entry.relop),
                         requestable=Requestable(entry.requestable), consumable=Consumable(entry.consumable),
                         builtin=entry.name in BUILTIN_BY_NAME)
        except ValueError as error:
            return None, None, [str(error)]
        return cx, None, []
    if not isinstance(entry, Mapping):
        return None, None, [f"expected a mapping with {', '.join(_COLUMNS)}, got {entry!r}"]
    problems: list[str] = []
    unknown = sorted(str(key) for key in entry if key not in _COLUMNS)
    if unknown:
        problems.append(f"unknown column(s): {', '.join(unknown)}")
    missing = [column for column in _COLUMNS if column not in entry or entry[column] is None and column != "default"]
    if missing:
        problems.append(f"missing column(s): {', '.join(missing)}")
        return None, None, problems
    name, shortcut = _text(entry["name"]), _text(entry["shortcut"])
    for column, value in (("name", name), ("shortcut", shortcut)):
        problem = _name_problem(column, value)
        if problem:
            problems.append(problem)
    type_text = _text(entry["type"]).upper()
    try:
        vtype = ValueType(type_text)
    except ValueError:
        problems.append(f'unknown complex attribute type "{_text(entry["type"])}"')
    relop_text = _text(entry["relop"])
    relop_text = relop_text.upper() if relop_text.upper() == "EXCL" else relop_text
    try:
        relop = Relop(relop_text)
    except ValueError:
        problems.append(f'unknown relational operator "{relop_text}" (use ==, !=, <, <=, >, >= or EXCL)')
    flags: dict[str, str] = {}
    for column in ("requestable", "consumable"):
        word = _FLAG_WORDS[column].get(_flag(entry[column]))
        if word is None:
            choices = "YES, NO or FORCED" if column == "requestable" else "YES, JOB or NO"
            problems.append(f'unknown {column} value "{_text(entry[column])}" (use {choices})')
        else:
            flags[column] = word
    if problems:
        return None, None, problems
    raw_default = entry.get("default")
    default = _text(raw_default) if raw_default is not None else ""
    if default == "":
        default = "NONE" if vtype in STRING_TYPES else "0"
    urgency: int | float = 0
    urgency_problem = None
    try:
        parsed = parse_number(entry["urgency"])
        urgency = int(parsed) if float(parsed).is_integer() else parsed
    except InvalidInput as error:
        urgency_problem = error.message
    cx = Complex(name, shortcut, vtype, relop, Requestable(flags["requestable"]),
                 Consumable(flags["consumable"]), default, urgency, builtin=name in BUILTIN_BY_NAME)
    return cx, urgency_problem, []


def _parse_typed(vtype: ValueType, raw: Any) -> int | float | bool | str:
    """Read ``raw`` in the given type; raises quantities' ValueRefused."""
    if vtype is ValueType.INT:
        return parse_number(raw, integer=True)
    if vtype is ValueType.DOUBLE:
        return parse_number(raw)
    if vtype is ValueType.MEMORY:
        return parse_memory(raw)
    if vtype is ValueType.TIME:
        return parse_time(raw)
    if vtype is ValueType.BOOL:
        return parse_bool(raw)
    return raw if isinstance(raw, str) else _text(raw)


def definition_problems(cx: Complex, urgency_problem: str | None = None) -> list[str]:
    """Every complex(5) / SPEC 000 section 2 rule ``cx`` breaks, in the order
    Grid Engine checks them (sge_centry.c, centry_elem_validate); the
    duplicate check needs the whole table and is done by ComplexTable.
    """
    problems: list[str] = []
    name, vtype, relop = cx.name, cx.type, cx.relop
    consumable = cx.is_consumable
    # The relops a type admits.
    if vtype in NUMERIC_TYPES:
        if relop is Relop.EXCL:
            problems.append(REASON_EXCL_NEEDS_BOOL.format(name=name))
    elif vtype in STRING_TYPES:
        if relop not in (Relop.EQ, Relop.NE):
            problems.append(REASON_INVALID_RELOP.format(name=name))
        if consumable:
            problems.append(REASON_TYPE_NOT_CONSUMABLE.format(name=name, type=vtype.value))
    else:  # BOOL
        if relop not in (Relop.EQ, Relop.EXCL):
            problems.append(REASON_INVALID_RELOP.format(name=name))
        if consumable and relop is not Relop.EXCL:
            problems.append(REASON_EXCLUSIVE_NEEDS_EXCL.format(name=name))
        if relop is Relop.EXCL and not consumable:
            problems.append(REASON_EXCLUSIVE_NOT_CONSUMABLE.format(name=name))
    # tmpdir may never be requested (Grid Engine CR6650497).
    if name == "tmpdir" and cx.requestable is not Requestable.NO:
        problems.append(REASON_NOT_REQUESTABLE.format(name=name))
    # Consumables: <= only, and the default follows requestable.
    if consumable and vtype not in STRING_TYPES:
        if relop not in (Relop.LE, Relop.EXCL):
            problems.append(REASON_CONSUMABLE_RELOP.format(name=name))
        try:
            default = float(_parse_typed(vtype, cx.default))
        except InvalidInput:
            problems.append(REASON_DEFAULT_TYPE.format(name=name, type=vtype.value))
        else:
            if math.isinf(default) or default < 0:
                problems.append(REASON_DEFAULT_TYPE.format(name=name, type=vtype.value))
            elif cx.requestable is Requestable.NO and default == 0:
                problems.append(REASON_NEEDS_DEFAULT.format(name=name))
            elif cx.requestable is Requestable.FORCED and default != 0:
                problems.append(REASON_FORCED_DEFAULT.format(name=name))
    elif not consumable:
        if vtype in STRING_TYPES:
            if cx.default.upper() != "NONE":
                problems.append(REASON_NO_DEFAULT.format(name=name))
        else:
            try:
                default = float(_parse_typed(vtype, cx.default))
            except InvalidInput:
                problems.append(REASON_DEFAULT_TYPE.format(name=name, type=vtype.value))
            else:
                if default != 0:
                    problems.append(REASON_NO_DEFAULT.format(name=name))
    if urgency_problem is not None:
        problems.append(REASON_URGENCY.format(name=name, problem=urgency_problem))
    # Built-ins keep their type, except within STRING/CSTRING/RESTRING.
    builtin = BUILTIN_BY_NAME.get(name)
    if builtin is not None and builtin.type is not vtype:
        if not (builtin.type in STRING_FAMILY and vtype in STRING_FAMILY):
            problems.append(REASON_TYPE_CHANGE.format(name=name))
    return problems


# -- the table ----------------------------------------------------------------------
_RENDER_MIN_WIDTHS = (19, 10, 11, 5, 11, 10, 8, 8)
_RENDER_HEADER = ("#name", "shortcut", "type", "relop", "requestable", "consumable", "default", "urgency")
RENDER_FOOTER = "# >#< starts a comment but comments are not saved across edits --------"


class ComplexTable:
    """The complete set of complex attributes (complex(5); ``qconf -sc``).

    Built from every definition at once, as ``qconf -Mc`` replaces the
    whole configuration: each definition must obey the rules (see
    :func:`definition_problems`), names and shortcuts must be unique across
    all names and shortcuts, and every built-in attribute must be present
    (built-ins cannot be deleted). All problems are collected and raised
    together as one ComplexDefinitionError; ``labels`` name each entry in
    it (default ``complexes[i]``).
    """

    def __init__(self, definitions: Iterable[Complex | Mapping[str, Any]], *,
                 labels: Iterable[str] | None = None) -> None:
        entries = list(definitions)
        where = list(labels) if labels is not None else [f"complexes[{i}]" for i in range(len(entries))]
        problems: list[tuple[str, str]] = []
        accepted: list[Complex] = []
        keys: dict[str, Complex] = {}
        present: set[str] = set()
        for label, entry in zip(where, entries):
            cx, urgency_problem, fatal = _coerce(entry)
            if cx is None:
                problems.extend((label, message) for message in fatal)
                continue
            present.add(cx.name)
            found = definition_problems(cx, urgency_problem)
            if cx.name in keys or cx.shortcut in keys:
                found.append(REASON_ALREADY_EXISTS.format(name=cx.name, shortcut=cx.shortcut))
            else:
                keys[cx.name] = cx
                keys[cx.shortcut] = cx
            problems.extend((label, message) for message in found)
            if not found:
                accepted.append(cx)
        for builtin in BUILTIN_COMPLEXES:
            if builtin.name not in present:
                problems.append(("complexes", REASON_BUILTIN_DELETED.format(name=builtin.name)))
        if problems:
            raise ComplexDefinitionError(problems)
        self._by_name: dict[str, Complex] = {cx.name: cx for cx in sorted(accepted, key=lambda c: c.name)}
        self._by_key: dict[str, Complex] = dict(keys)
        # Names and shortcuts of the FORCED attributes: few tables have any,
        # and the Matcher asks on every level of every candidate.
        self.forced_keys = frozenset(key for key, cx in keys.items() if cx.requestable is Requestable.FORCED)

    # construction
    @classmethod
    def builtin(cls) -> ComplexTable:
        """The default table alone."""
        return cls(BUILTIN_COMPLEXES, labels=[f"builtin {cx.name}" for cx in BUILTIN_COMPLEXES])

    @classmethod
    def with_user_complexes(cls, entries: Iterable[Mapping[str, Any] | Complex]) -> ComplexTable:
        """The built-ins plus cluster.yaml's ``complexes`` list.

        Each entry has the eight columns (YES/NO may be YAML booleans). An
        entry named like a built-in modifies that built-in, within the rules
        (a new type only inside STRING/CSTRING/RESTRING). Problems are
        labelled ``complexes[i]``.
        """
        user = list(entries)
        merged: dict[str, tuple[str, Complex | Mapping[str, Any]]] = {
            cx.name: (f"builtin {cx.name}", cx) for cx in BUILTIN_COMPLEXES
        }
        extra: list[tuple[str, Complex | Mapping[str, Any]]] = []
        for index, entry in enumerate(user):
            label = f"complexes[{index}]"
            name = entry.name if isinstance(entry, Complex) else (
                _text(entry.get("name")) if isinstance(entry, Mapping) and entry.get("name") is not None else None)
            if name in merged and merged[name][0].startswith("builtin "):
                merged[name] = (label, entry)
            else:
                extra.append((label, entry))
        pairs = list(merged.values()) + extra
        return cls([entry for _, entry in pairs], labels=[label for label, _ in pairs])

    @classmethod
    def parse(cls, text: str, *, source: str = "complexes") -> ComplexTable:
        """Read a ``qconf -Mc`` file: one definition of eight blank-separated
        columns per line; lines starting with ``#`` and blank lines are
        ignored. Problems name ``source:line``.
        """
        entries: list[dict[str, str]] = []
        labels: list[str] = []
        problems: list[tuple[str, str]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            fields = stripped.split()
            if len(fields) != len(_COLUMNS):
                problems.append((f"{source}:{number}",
                                 f"expected {len(_COLUMNS)} columns ({' '.join(_COLUMNS)}), got {len(fields)}"))
                continue
            entries.append(dict(zip(_COLUMNS, fields)))
            labels.append(f"{source}:{number}")
        if problems:
            raise ComplexDefinitionError(problems)
        return cls(entries, labels=labels)

    # lookup
    def get(self, name_or_shortcut: str) -> Complex | None:
        """The definition with this name or shortcut (case-sensitive), or None."""
        return self._by_key.get(name_or_shortcut)

    def resolve(self, name_or_shortcut: str) -> Complex:
        """Like :meth:`get`, but an unknown name raises InvalidInput."""
        cx = self._by_key.get(name_or_shortcut)
        if cx is None:
            raise InvalidInput(REASON_UNKNOWN_RESOURCE.format(name=name_or_shortcut))
        return cx

    def __iter__(self) -> Iterator[Complex]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name_or_shortcut: object) -> bool:
        return name_or_shortcut in self._by_key

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    # output
    def render(self) -> str:
        """The ``qconf -sc`` text: a header, a ``#---`` rule, one aligned line
        per attribute sorted by name, and Grid Engine's footer comment.
        Columns are as wide as Grid Engine's (19 10 11 5 11 10 8) or as the
        longest value; trailing blanks are dropped.
        """
        rows = [cx.columns() for cx in self]
        widths = [
            max([minimum, len(_RENDER_HEADER[i])] + [len(row[i]) for row in rows])
            for i, minimum in enumerate(_RENDER_MIN_WIDTHS)
        ]

        def line(cells: tuple[str, ...]) -> str:
            return " ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

        rule = "#" + "-" * (sum(widths) + len(widths) - 2)
        return "\n".join([line(_RENDER_HEADER), rule, *(line(row) for row in rows), RENDER_FOOTER]) + "\n"


# -- values -------------------------------------------------------------------------
def parse_value(cx: Complex, raw: Any, *, where: str | None = None) -> int | float | bool | str:
    """Read a value of ``cx`` (a request, or a complex_values entry).

    MEMORY gives bytes, TIME seconds (``1:00:00`` -> 3600), BOOL a bool,
    INT an int, DOUBLE a float, strings are kept. ``infinity`` means no
    limit, except for consumables; a consumable may not be negative
    (sge_centry.c, centry_fill_and_check). Raises InvalidInput with
    ``where`` (default: the attribute's name).
    """
    where = where or cx.name
    if cx.type in STRING_TYPES:
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise InvalidInput(f'attribute "{cx.name}" expects a string, got {raw!r}', where=where)
        return _text(raw) if not isinstance(raw, str) else raw
    try:
        value = _parse_typed(cx.type, raw)
    except ValueRefused as error:
        raise InvalidInput(
            f'attribute "{cx.name}" is not {_VALUE_WORDS[cx.type]} ({error.text!r}: {error.problem})',
            where=where,
        ) from None
    if cx.is_consumable and not isinstance(value, bool):
        assert isinstance(value, (int, float))
        if math.isinf(value):
            raise InvalidInput(REASON_INFINITE_CONSUMABLE.format(name=cx.name), where=where)
        if value < 0:
            raise InvalidInput(REASON_NEGATIVE_CONSUMABLE.format(name=cx.name), where=where)
    return value


def default_value(cx: Complex) -> float:
    """The numeric default of ``cx`` (0 for non-consumables and strings)."""
    return _default_number(cx.type, cx.default)


@functools.lru_cache(maxsize=1024)
def _default_number(vtype: ValueType, default: str) -> float:
    # Read once per (type, text): the Matcher asks for it for every
    # consumable a task queue does not request, on every level of every
    # candidate queue (a few per cent of a match when parsed each time).
    if vtype in STRING_TYPES or default.upper() == "NONE":
        return 0.0
    return float(_parse_typed(vtype, default))


def format_value(cx: Complex, value: Any) -> str:
    """A value written in its type: ``2G``, ``01:00:00``, ``TRUE``, ``4``."""
    if value is None:
        return "NONE"
    if cx.type in STRING_TYPES or isinstance(value, str):
        return str(value)
    if cx.type is ValueType.BOOL:
        return "TRUE" if value else "FALSE"
    if cx.type is ValueType.MEMORY:
        return format_memory(value)
    if cx.type is ValueType.TIME:
        return format_time(value)
    return format_number(value)


def numeric_value(cx: Complex, value: Any) -> float:
    """A numeric complex's value as a float (a string read by the type first)."""
    if isinstance(value, str):
        value = _parse_typed(cx.type, value)
    return float(value)


def satisfies(cx: Complex, requested: Any, offered: Any) -> bool:
    """Whether an offer meets a request: ``requested RELOP offered``.

    complex(5) "relop" with the request on the left (sge_complex_schedd.c,
    resource_cmp): ``h_vmem`` (``<=``) requested 2G, offered 4G -> 2G <= 4G.
    EXCL holds when nothing is requested or the request fits the offer.
    Strings: the request is a wildcard expression matched against the
    offered value (patterns.py; CSTRING and HOST without case); ``!=``
    holds when it does not match, and also when the expression is malformed
    (Grid Engine's matcher then reports "not equal"). Values may be given
    parsed or as text.
    """
    if cx.type in STRING_TYPES:
        try:
            matched = compile_pattern(str(requested)).matches(
                str(offered), ignore_case=cx.type in CASELESS_TYPES)
        except InvalidInput:
            matched = None
        if cx.relop is Relop.EQ:
            return matched is True
        if cx.relop is Relop.NE:
            return matched is not True
        return False
    request, offer = numeric_value(cx, requested), numeric_value(cx, offered)
    relop = cx.relop
    if relop is Relop.EQ:
        return request == offer
    if relop is Relop.NE:
        return request != offer
    if relop is Relop.LT:
        return request < offer
    if relop is Relop.LE:
        return request <= offer
    if relop is Relop.GT:
        return request > offer
    if relop is Relop.GE:
        return request >= offer
    return request == 0 or request <= offer  # EXCL


def validate_requests(table: ComplexTable, requests: Mapping[str, Any],
                      where: str = "ResourceRequests") -> dict[str, Any]:
    """Check a job's hard resource requests (qsub -l; JDL ResourceRequests).

    Names or shortcuts become canonical names; unknown names, attributes
    that are not requestable (requestable NO) and values that do not read
    in their type are refused, naming ``where.key``; a string request must
    be a well-formed wildcard expression. Returns ``{name: parsed value}``.
    """
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, raw in requests.items():
        place = f"{where}.{key}"
        cx = table.get(key)
        if cx is None:
            raise InvalidInput(REASON_UNKNOWN_RESOURCE.format(name=key), where=place)
        if cx.name in given_as:
            raise InvalidInput(f"{cx.name} is requested twice (as {given_as[cx.name]!r} and {key!r})", where=place)
        if cx.requestable is Requestable.NO:
            raise InvalidInput(REASON_NON_REQUESTABLE.format(name=cx.name), where=place)
        value = parse_value(cx, raw, where=place)
        if cx.type in STRING_TYPES:
            try:
                compile_pattern(str(value))
            except InvalidInput as error:
                raise InvalidInput(error.message, where=place) from None
        given_as[cx.name] = key
        out[cx.name] = value
    return out


# -- consumables --------------------------------------------------------------------
def consumable_amount(cx: Complex, requested: Any | None, slots: int, *, master: bool = True) -> float:
    """How much of ``cx`` a job debits where ``cx`` is managed (complex(5)
    "consumable", "default"; SPEC 000 E1/E2).

    YES: the request (or, when not requested, the default) per slot, times
    ``slots``. JOB: the request or default once, and only where the master
    task runs (``master=False`` gives 0). EXCL (exclusive BOOL): 1 when the
    job asks for exclusivity, whatever its slots. Not consumable: 0.
    """
    if not cx.is_consumable:
        return 0.0
    amount = default_value(cx) if requested is None else numeric_value(cx, requested)
    if cx.relop is Relop.EXCL:
        return 1.0 if amount else 0.0
    if cx.consumable is Consumable.JOB:
        return amount if master else 0.0
    return amount * slots


def fits(amount: float, capacity: float, used: float) -> bool:
    """Whether ``amount`` more fits in ``capacity`` of which ``used`` is taken."""
    return used + amount <= capacity


# -- FORCED -------------------------------------------------------------------------
def forced_missing(table: ComplexTable, requests: Iterable[str], offered_names: Iterable[str]) -> list[str]:
    """FORCED attributes a level of the candidate defines (``offered_names``:
    the names in its global, host and queue complex_values) that the job
    does not request: the job may not run there (complex(5) "requestable";
    the job is not refused at submission, examples.md 1.6). Sorted names.
    """
    offered_forced = [key for key in offered_names if key in table.forced_keys]
    if not offered_forced:
        return []
    requested = {cx.name for cx in (table.get(key) for key in requests) if cx is not None}
    return sorted({table.resolve(key).name for key in offered_forced} - requested)

