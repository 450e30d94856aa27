"""Values with units: sge_types(1) memory_specifier, time_specifier, boolean.

Grid Engine reads every numeric complex value (INT, DOUBLE, MEMORY, TIME,
BOOL) with one number reader. sge_types(1) describes it as "positive
integer constants"; the reader actually accepts more, and examples.md
(sections 3 and 4, section 9 item 11) records what it accepts. We accept
the same language, with the deviations listed under "Stricter than Grid
Engine" below.

A number is
  * ``infinity`` (any case): no limit, returned as ``math.inf``;
  * ``true`` / ``false`` (any case): 1 and 0, for every numeric type;
  * a hexadecimal (``0x10``) or, when it starts with ``0`` and has no
    ``.``, an octal integer (``010`` = 8, ``08`` is refused);
  * otherwise a decimal number with optional sign, fraction and exponent
    (``1.5``, ``.5``, ``1e3``, ``-1``);
followed by at most one multiplier letter and then the end of the text:
``k`` = 1000, ``K`` = 1024, ``m`` = 1000^2, ``M`` = 1024^2, ``g`` = 1000^3,
``G`` = 1024^3. There is no ``T`` and no unit word (``1KB`` is refused).
The multipliers apply to times too: ``2m`` is two million seconds, not two
minutes (``1h`` is refused).

A time may also be written ``hours:minutes:seconds``: exactly three fields,
each a decimal number that may be empty (= 0), fractional or negative, and
not range-checked (``0:90:0`` = 5400, ``1::1`` = 3601, ``1:-5:0`` = 3300);
blanks may follow the seconds. ``1:30`` is refused.

Stricter than Grid Engine
  * A value is one token: leading or trailing blanks are refused (except
    after the seconds of ``h:m:s``), and so is ``1,2`` (the C reader stops
    at ``,`` and ``/`` because it also reads lists).
  * ``h:m:s`` is a time form only; memory and plain numbers refuse it.
  * A BOOL is only true/false (any case), 1 or 0.

Refusals raise InvalidInput naming the text and the problem.
"""

from __future__ import annotations

import math
import re

from wms.core.errors import InvalidInput

KILO, MEGA, GIGA = 1000, 1000**2, 1000**3
KIBI, MEBI, GIBI = 1024, 1024**2, 1024**3
MULTIPLIERS: dict[str, int] = {"k": KILO, "K": KIBI, "m": MEGA, "M": MEBI, "g": GIGA, "G": GIBI}
INFINITY = math.inf

_DECIMAL = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_OCTAL = re.compile(r"0[0-7]*")
_FIELD = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|")

Number = int | float


class ValueRefused(InvalidInput):
    """A value that does not read in its type; keeps the parts of the message."""

    def __init__(self, text: object, kind: str, problem: str) -> None:
        self.text = text
        self.kind = kind
        self.problem = problem
        shown = repr(text)
        super().__init__(f"{shown if len(shown) <= 60 else shown[:57] + '...'} is not {kind}: {problem}")


def _refuse(text: object, kind: str, problem: str) -> ValueRefused:
    return ValueRefused(text, kind, problem)


def _from_python(value: object, kind: str) -> float | None:
    """Numbers given as Python numbers (e.g. from YAML) pass through."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            raise _refuse(value, kind, "NaN is not a number")
        return float(value)
    if not isinstance(value, str):
        raise _refuse(value, kind, f"expected text or a number, got {type(value).__name__}")
    return None


def _scan(text: str, kind: str) -> float:
    """Read the number-with-multiplier language described in the module docstring."""
    if text == "":
        raise _refuse(text, kind, "the value is empty")
    folded = text.lower()
    if folded == "infinity":
        return INFINITY
    if folded == "true":
        return 1.0
    if folded == "false":
        return 0.0
    if text[0].isspace() or text[-1].isspace():
        raise _refuse(text, kind, "blanks are not allowed around the value")
    if text[0] == "0" and "." not in text:
        hex_match = _HEX.match(text)
        if hex_match:
            value, rest = float(int(hex_match.group()[2:], 16)), text[hex_match.end():]
        else:
            octal = _OCTAL.match(text)
            assert octal is not None
            digits, rest = octal.group(), text[octal.end():]
            if rest[:1].isdigit():
                raise _refuse(text, kind, f"a number starting with 0 is octal, and {rest[0]!r} is not an octal digit")
            value = float(int(digits, 8))
    else:
        match = _DECIMAL.match(text)
        if not match:
            raise _refuse(text, kind, "no number found")
        number, rest = match.group(), text[match.end():]
        unsigned = number.lstrip("+-")
        if unsigned[:2].lower() == "0x":
            value = float(int(unsigned[2:], 16))
            value = -value if number.startswith("-") else value
        else:
            value = float(number)
    if rest:
        letter, tail = rest[0], rest[1:]
        if not letter.isalpha():
            raise _refuse(text, kind, f"unexpected {rest!r} after the number")
        if letter not in MULTIPLIERS:
            raise _refuse(text, kind, f"unknown multiplier {letter!r} (use k, K, m, M, g or G)")
        if tail:
            raise _refuse(text, kind, f"unexpected {tail!r} after the multiplier {letter!r}")
        value *= MULTIPLIERS[letter]
    return value


def _scan_hms(text: str, kind: str) -> float:
    """Read ``hours:minutes:seconds`` (sge_types(1) time_specifier)."""
    body = text.rstrip()
    fields = body.split(":")
    if len(fields) != 3:
        raise _refuse(text, kind, f"the h:m:s form needs exactly 3 fields, got {len(fields)}")
    total = 0.0
    for name, weight, part in zip(("hours", "minutes", "seconds"), (3600, 60, 1), fields):
        if not _FIELD.fullmatch(part):
            raise _refuse(text, kind, f"the {name} field {part!r} is not a decimal number")
        total += weight * (float(part) if part else 0.0)
    return total


def parse_memory(text: str | int | float) -> float:
    """Bytes from a sge_types(1) memory_specifier (``4G`` -> 4294967296.0).

    ``infinity`` gives ``math.inf``; see the module docstring for the rest.
    """
    kind = "a memory value"
    given = _from_python(text, kind)
    if given is not None:
        return given
    assert isinstance(text, str)
    if ":" in text:
        raise _refuse(text, kind, "the h:m:s form is for times only")
    return _scan(text, kind)


def parse_time(text: str | int | float) -> float:
    """Seconds from a sge_types(1) time_specifier (``1:30:00`` -> 5400.0).

    Plain numbers are seconds (multipliers allowed); ``infinity`` gives
    ``math.inf``.
    """
    kind = "a time value"
    given = _from_python(text, kind)
    if given is not None:
        return given
    assert isinstance(text, str)
    if ":" in text:
        if text[:1].isspace():
            raise _refuse(text, kind, "blanks are not allowed around the value")
        return _scan_hms(text, kind)
    return _scan(text, kind)


def time_limit(value: str | int | float | None) -> float | None:
    """A runtime limit (h_rt, s_rt) in seconds, None when there is none: not
    requested, or ``infinity``. The one reading of "is there a limit"."""
    if value is None:
        return None
    seconds = parse_time(value)
    return None if math.isinf(seconds) else float(seconds)


def parse_number(text: str | int | float, *, integer: bool = False) -> Number:
    """An INT (``integer=True``) or DOUBLE value of complex(5).

    Uses the same language as memory values (so ``1k`` = 1000). With
    ``integer`` the result must be whole (``2.5`` is refused) and is
    returned as ``int``, except ``infinity`` which stays ``math.inf``.
    """
    kind = "an integer value" if integer else "a double value"
    value = _from_python(text, kind)
    if value is None:
        assert isinstance(text, str)
        if ":" in text:
            raise _refuse(text, kind, "the h:m:s form is for times only")
        value = _scan(text, kind)
    if not integer or math.isinf(value):
        return value
    if not value.is_integer():
        raise _refuse(text, kind, "it has a fractional part")
    return int(value)


def parse_bool(text: str | int | float | bool) -> bool:
    """A BOOL value of complex(5): TRUE/FALSE in any case, 1 or 0."""
    if isinstance(text, bool):
        return text
    kind = "a boolean value"
    if isinstance(text, str):
        folded = text.lower()
        if folded in ("true", "false"):
            return folded == "true"
        if folded == "infinity":
            raise _refuse(text, kind, "use TRUE, FALSE, 1 or 0")
    try:
        value = parse_number(text)
    except InvalidInput:
        raise _refuse(text, kind, "use TRUE, FALSE, 1 or 0") from None
    if value not in (0, 1):
        raise _refuse(text, kind, "use TRUE, FALSE, 1 or 0")
    return value == 1


def _trim(number: float, decimals: int = 3) -> str:
    text = f"{number:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def format_number(value: float | int) -> str:
    """A number as Grid Engine users write it: ``4``, ``2.5``, ``infinity``."""
    if isinstance(value, float):
        if math.isinf(value):
            return "infinity" if value > 0 else "-infinity"
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)


def format_memory(value: float | int) -> str:
    """Bytes as the largest binary unit (G, M, K) the value reaches, with at
    most three decimals and no trailing zeros: ``4G``, ``3.5G``, ``512K``,
    ``953.674M`` (1g), ``100``. Grid Engine prints the same units with a
    fixed ``%.3f``; we drop the trailing zeros. ``math.inf`` is ``infinity``.
    """
    if math.isinf(value):
        return "infinity" if value > 0 else "-infinity"
    size = abs(value)
    for letter, unit in (("G", GIBI), ("M", MEBI), ("K", KIBI)):
        if size >= unit:
            return _trim(value / unit) + letter
    return _trim(value)


def format_time(value: float | int) -> str:
    """Seconds as ``HH:MM:SS`` (``3600`` -> ``01:00:00``).

    Hours are not folded into days (``86410`` -> ``24:00:10``, as qrstat
    prints durations), so the text reads back with :func:`parse_time`;
    fractions of a second are dropped, as qstat does. ``math.inf`` is
    ``infinity``.
    """
    if math.isinf(value):
        return "infinity" if value > 0 else "-infinity"
    sign = "-" if value < 0 else ""
    seconds = int(abs(value))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
