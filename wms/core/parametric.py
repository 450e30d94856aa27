"""DIRAC parametric jobs: one JDL that describes several jobs.

Implements reference/examples.md section 7 "J3. DIRAC parametric jobs" (DIRAC's
semantics, in our own code) and INTERFACE.md "The job description"
(``Parameters = 10; // parametric: 10 jobs, %n in any string``). The gLite
meaning of the same attribute names (J5: ``Parameters`` as an exclusive upper
bound, ``_PARAM_``) is deliberately not implemented.

Sequences
    ``Parameters = {v0, v1, ...}`` lists the values (``ParameterStart`` and
    friends are then ignored); ``Parameters = N`` makes N values with
    ``ParameterStart`` (default 1), ``ParameterStep`` (default 0) and
    ``ParameterFactor`` (default 1): ``v0 = Start``,
    ``v(i) = v(i-1) * Factor + Step``. A named sequence ``X`` uses the same
    attributes suffixed ``.X`` (``Parameters.X``, ``ParameterStart.X``, ...);
    without its own ``Parameters.X`` it takes its length from ``Parameters``.
    Every sequence must have the same length.

Placeholders, replaced in every string (inside lists and nested records too,
and inside the string literals of expressions)
    ``%s`` this job's value of the unnamed sequence, ``%n`` the job index
    0..N-1 zero-padded to the width of N-1, ``%(X)s`` this job's value of the
    sequence ``X`` (names ignore case).

Each job loses the ``Parameters*`` attributes and gains ``Parameter``
(``Parameter.X`` per named sequence) and ``ParameterNumber``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from wms.core.classad import Expression, render_value
from wms.core.errors import JDLError

__all__ = ["MAX_JOBS", "MAX_VALUE", "expand", "format_value", "is_parametric"]

#: Most jobs one JDL may describe.
MAX_JOBS = 100_000
#: Largest absolute value a numeric sequence may reach (keeps Factor from
#: building numbers with thousands of digits).
MAX_VALUE = 10**18

_COUNT = "parameters"
_START = "parameterstart"
_STEP = "parameterstep"
_FACTOR = "parameterfactor"
_SPEC_BASES = (_COUNT, _START, _STEP, _FACTOR)
_DEFAULTS = {_START: 1, _STEP: 0, _FACTOR: 1}
_OUTPUT_BASES = ("parameter", "parameternumber")

_PLACEHOLDER_RE = re.compile(r"%\((?P<name>[^()]*)\)s|%s|%n")
_STRING_LITERAL_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_INT_TEXT_RE = re.compile(r"\s*[+-]?[0-9]+\s*")

Locate = Callable[[str], "str | None"]


def _split(key: str) -> tuple[str, str]:
    """``ParameterStart.A`` -> (``parameterstart``, ``A``)."""
    base, _, name = key.partition(".")
    return base.lower(), name


def is_parametric(attributes: Mapping[str, Any]) -> bool:
    """True when the attributes hold ``Parameters`` or ``Parameters.X``."""
    # _split inlined: this runs once for every job submitted
    return any(key.partition(".")[0].lower() == _COUNT for key in attributes)


def format_value(value: Any) -> str:
    """A parameter value as it is written into strings.

    Floats are rounded to 12 significant digits, so 0.1 * 3 prints ``0.3``.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(_clean_float(value))
    return str(value)


def _clean_float(value: float) -> float:
    return float(f"{value:.12g}") if math.isfinite(value) else value


class _Expander:
    def __init__(self, attributes: Mapping[str, Any], locate: Locate | None, max_jobs: int) -> None:
        self.attributes = attributes
        self.locate = locate
        self.max_jobs = max_jobs

    def fail(self, key: str | None, message: str) -> JDLError:
        where = self.locate(key) if self.locate is not None and key is not None else None
        return JDLError(message, where=where)

    # -- sequences ---------------------------------------------------------

    def number(self, key: str, value: Any) -> int | float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            text = value.strip()
            if _INT_TEXT_RE.fullmatch(text):
                return int(text)
            try:
                return float(text)
            except ValueError:
                pass
        raise self.fail(key, f"{key}: expected a number, got {render_value(value)}")

    def check_count(self, key: str, count: int) -> None:
        if count <= 0:
            raise self.fail(key, f"Illegal number of job parameters {count}")
        if count > self.max_jobs:
            raise self.fail(
                key,
                f"{key}: too many jobs from one parametric JDL: {count} > {self.max_jobs} (the limit)",
            )

    def count_of(self, key: str, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            count = value
        elif isinstance(value, float) and value.is_integer():
            count = int(value)
        elif isinstance(value, str) and _INT_TEXT_RE.fullmatch(value):
            count = int(value)
        else:
            raise self.fail(
                key, f"{key}: expected a list of values or a number of jobs, got {render_value(value)}"
            )
        self.check_count(key, count)
        return count

    def listed(self, key: str, values: list[Any]) -> list[Any]:
        self.check_count(key, len(values))
        for item in values:
            if not isinstance(item, (str, int, float)):  # bool is an int
                raise self.fail(
                    key, f"{key}: a parameter value must be a string or a number, got {render_value(item)}"
                )
        return [_clean_float(item) if isinstance(item, float) else item for item in values]

    def generated(self, count_key: str, count: int, spec: dict[str, tuple[str, Any]]) -> list[Any]:
        start, step, factor = (
            self.number(spec[base][0], spec[base][1]) if base in spec else _DEFAULTS[base]
            for base in (_START, _STEP, _FACTOR)
        )
        values: list[Any] = []
        value: int | float = start
        for index in range(count):
            if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_VALUE:
                raise self.fail(
                    count_key,
                    f"{count_key}: parameter value number {index} is out of range "
                    f"(more than {MAX_VALUE:.0e} in absolute value)",
                )
            values.append(_clean_float(value) if isinstance(value, float) else value)
            value = value * factor + step
        return values

    def sequences(self) -> tuple[dict[str, str], dict[str, list[Any]], int]:
        """Display names, values per lowercase sequence name ('' = unnamed), N."""
        specs: dict[str, dict[str, tuple[str, Any]]] = {}
        names: dict[str, str] = {}
        for key, value in self.attributes.items():
            base, name = _split(key)
            if base in _SPEC_BASES:
                specs.setdefault(name.lower(), {})[base] = (key, value)
                names.setdefault(name.lower(), name)
        unnamed = specs.get("", {})
        if _COUNT in unnamed:
            ref_key = unnamed[_COUNT][0]
        else:
            ref_key = next(spec[_COUNT][0] for spec in specs.values() if _COUNT in spec)
        ordered = sorted(specs, key=lambda n: (n != "", n != _split(ref_key)[1].lower()))
        values: dict[str, list[Any]] = {}
        ref_len: int | None = None
        for name in ordered:
            spec = specs[name]
            if _COUNT in spec:
                count_key, count_value = spec[_COUNT]
            elif _COUNT in unnamed:
                count_key, count_value = unnamed[_COUNT]
                if isinstance(count_value, list):
                    count_value = len(count_value)
            else:
                if name == "":
                    continue  # a stray ParameterStart without Parameters
                key = next(iter(spec.values()))[0]
                raise self.fail(
                    key, f"{key}: needs Parameters.{names[name]} or Parameters to give the number of values"
                )
            if isinstance(count_value, list):
                vector = self.listed(count_key, count_value)
            else:
                vector = self.generated(count_key, self.count_of(count_key, count_value), spec)
            if ref_len is None:
                ref_len = len(vector)
            elif len(vector) != ref_len:
                raise self.fail(
                    count_key,
                    f"Different length of parameter vectors: for {count_key}, {ref_len} != {len(vector)}",
                )
            values[name] = vector
        assert ref_len is not None
        return names, values, ref_len

    # -- substitution --------------------------------------------------------

    def substitute_text(self, key: str, text: str, index: int, width: int, current: dict[str, Any]) -> str:
        def replace(m: re.Match[str]) -> str:
            token = m.group()
            if token == "%n":
                return str(index).zfill(width)
            name = "" if token == "%s" else m.group("name")
            if name.lower() not in current:
                if name == "":
                    raise self.fail(key, f"{key}: uses %s but the JDL has no unnamed Parameters")
                raise self.fail(key, f"{key}: unknown parameter sequence {name!r} in {token}")
            return format_value(current[name.lower()])

        return _PLACEHOLDER_RE.sub(replace, text)

    def substitute(self, key: str, value: Any, index: int, width: int, current: dict[str, Any]) -> Any:
        if isinstance(value, str):
            return self.substitute_text(key, value, index, width, current)
        if isinstance(value, list):
            return [self.substitute(key, item, index, width, current) for item in value]
        if isinstance(value, dict):
            return {k: self.substitute(key, v, index, width, current) for k, v in value.items()}
        if isinstance(value, Expression):

            def in_literal(m: re.Match[str]) -> str:
                body = self.substitute_text(key, m.group()[1:-1], index, width, _escaped(current))
                return f'"{body}"'

            return Expression(_STRING_LITERAL_RE.sub(in_literal, value.text))
        return value

    def expand(self) -> list[dict[str, Any]]:
        names, values, count = self.sequences()
        width = len(str(count - 1))
        kept = {
            key: value
            for key, value in self.attributes.items()
            if _split(key)[0] not in _SPEC_BASES + _OUTPUT_BASES
        }
        jobs: list[dict[str, Any]] = []
        for index in range(count):
            current = {name: vector[index] for name, vector in values.items()}
            job = {key: self.substitute(key, value, index, width, current) for key, value in kept.items()}
            for name, value in current.items():
                job["Parameter" + (f".{names[name]}" if name else "")] = value
            job["ParameterNumber"] = index
            jobs.append(job)
        return jobs


def _escaped(current: dict[str, Any]) -> dict[str, Any]:
    """Values ready to go inside a ClassAd string literal."""
    return {name: render_value(format_value(value))[1:-1] for name, value in current.items()}


def expand(
    attributes: Mapping[str, Any],
    *,
    locate: Locate | None = None,
    max_jobs: int = MAX_JOBS,
) -> list[dict[str, Any]]:
    """Expand a parametric job description into one attribute dict per job.

    *attributes* are a JDL's top-level attributes as plain Python (see
    :func:`wms.core.classad.parse_record`). Without ``Parameters`` or
    ``Parameters.X`` the result is one unchanged copy. *locate* maps an
    attribute name to the ``where`` of the errors about it (``file:line:col``).

    Raises :class:`JDLError`: ``Illegal number of job parameters 0``,
    ``Different length of parameter vectors: for Parameters.B, 3 != 4``, more
    than *max_jobs* jobs, a placeholder naming no sequence, a non-numeric
    ``ParameterStart``/``Step``/``Factor``.
    """
    if not is_parametric(attributes):
        return [dict(attributes)]
    return _Expander(attributes, locate, max_jobs).expand()
