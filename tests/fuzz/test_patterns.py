"""Shell-pattern operands of sge_types(1) expressions (wms/core/patterns.py):
the linear matcher agrees with the regular-expression translation it
replaced, and its cost grows with pattern x value, never exponentially.

``reference_regex`` is that translation as it was (``.*`` for a star,
fullmatch with DOTALL): right, but it backtracks, and ``*?*?*?...Z``
against a long value took minutes. It is kept here as the specification
the new matcher is held to.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from wms.core import patterns
from wms.core.errors import InvalidInput
from wms.core.patterns import compile_pattern

# -- the translation the matcher replaced ----------------------------------------------

_REFERENCE_CLASSES: dict[str, str] = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "blank": " \\t",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "xdigit": "0-9A-Fa-f",
    "cntrl": "\\x00-\\x1f\\x7f",
    "print": "\\x20-\\x7e",
    "graph": "\\x21-\\x7e",
}


def reference_regex(pattern: str) -> str | None:
    """The regular expression the pattern used to be compiled to (None: never matches)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
            i += 1
        elif char == "?":
            out.append(".")
            i += 1
        elif char == "\\":
            if i + 1 >= n:
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif char == "[":
            parsed = _reference_bracket(pattern, i)
            if parsed is None:
                out.append(re.escape("["))
                i += 1
            else:
                regex, i = parsed
                out.append(regex)
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _reference_bracket(pattern: str, start: int) -> tuple[str, int] | None:
    i, n = start + 1, len(pattern)
    negate = i < n and pattern[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while i < n:
        char = pattern[i]
        if char == "]" and not first:
            body = "".join(members)
            if not body:
                return ("[^\\s\\S]" if not negate else "[\\s\\S]"), i + 1
            return ("[^" if negate else "[") + body + "]", i + 1
        first = False
        if char == "[" and pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close != -1:
                name = pattern[i + 2:close]
                if name not in _REFERENCE_CLASSES:
                    raise ValueError(f"unknown character class '[:{name}:]'")
                members.append(_REFERENCE_CLASSES[name])
                i = close + 2
                continue
        if char == "\\":
            if i + 1 >= n:
                return None
            char = pattern[i + 1]
            i += 1
        low = char
        i += 1
        if i + 1 < n and pattern[i] == "-" and pattern[i + 1] != "]":
            high = pattern[i + 1]
            step = 2
            if high == "\\":
                if i + 2 >= n:
                    return None
                high = pattern[i + 2]
                step = 3
            i += step
            if low <= high:
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            continue
        members.append(re.escape(low))
    return None


def reference_matches(pattern: str, value: str) -> bool | None:
    """What the old translation answered; None when it refused the pattern."""
    try:
        regex = reference_regex(pattern)
    except ValueError:
        return None
    return regex is not None and re.fullmatch(regex, value, re.DOTALL) is not None


# -- agreement ----------------------------------------------------------------------------

# Operands only (no blank, "!", "&", "|", parentheses): the expression around
# them is read by the same parser as before.
OPERAND_PIECES = ["*", "*", "?", "[", "]", "^", "-", "\\", ":", "a", "b", "z", "A", "0", "9", ".", "\n", "é",
                  "\u4e01", "[:digit:]", "[:alpha:]", "[:space:]", "[:punct:]", "[:nosuch:]", "[]", "[^", "a-z", "z-a"]
VALUE_CHARS = "ab-zA09.:^[]\\*?\n\té\u4000\u4e01\u4e02"
OPERANDS = st.lists(st.sampled_from(OPERAND_PIECES), min_size=1, max_size=12).map("".join)
VALUES = st.text(alphabet=VALUE_CHARS, max_size=12)


def outcome(pattern: str, value: str) -> bool | None:
    try:
        compiled = compile_pattern(pattern)
    except InvalidInput:
        return None
    return compiled.matches(value)


@given(OPERANDS, VALUES)
@example("[]a]x", "]x")
@example("[a-]x", "-x")
@example("[^]]", "]")
@example("[\\", "[\\")
@example("*a*\\", "aa\\")
@example("[z-a]", "a")
@example("[^z-a]", "\n")
@example("[[:punct:]-a]", "-")
@example("[a-\u4e01]", "\u4000")  # a range wider than _SPELLED_OUT
@example("[^a-\u4e01]", "\u4e02")
@example("a*a*a*b", "aaaaab")
@example("*?*?a", "ba")
def test_the_matcher_agrees_with_the_regular_expression(pattern: str, value: str) -> None:
    if not any(char in patterns.WILDCARD_CHARS for char in pattern):
        pattern += "*"  # an operand without wildcards is compared literally, not as a pattern
    assert outcome(pattern, value) == reference_matches(pattern, value)


@given(OPERANDS, st.text(alphabet="abcAB*?", max_size=10))
def test_the_matcher_agrees_on_values_built_from_the_pattern(pattern: str, noise: str) -> None:
    # Values drawn from the pattern's own characters reach the matching
    # branches far more often than random text does.
    if not any(char in patterns.WILDCARD_CHARS for char in pattern):
        pattern += "*"
    value = "".join(char for char in pattern if char not in "*?[]\\") + noise
    for candidate in (value, value[::-1], noise, pattern):
        assert outcome(pattern, candidate) == reference_matches(pattern, candidate)


# -- cost ------------------------------------------------------------------------------

# Each shape fails against "a" * n, most of them only after the last segment
# has been tried at every position.
HOSTILE = {
    "star-question": lambda k: "*?" * k + "Z",
    "star-question-a": lambda k: "*?a" * k + "*?b*",
    "star-a-question": lambda k: "*a?" * k + "*[b]*",
    "long-segment": lambda k: "*" + "?" * k + "b*",
    "sets": lambda k: "*[a-c]" * k + "*[^a]*",
}


@contextmanager
def counting_segment_tries() -> Iterator[list[int]]:
    """Counts the times a segment is tried at a position of the value."""
    count = [0]
    try_at = patterns._Segment.at

    def counting(self, value: str, pos: int) -> bool:
        count[0] += 1
        return try_at(self, value, pos)

    patterns._Segment.at = counting  # type: ignore[method-assign]
    try:
        yield count
    finally:
        patterns._Segment.at = try_at  # type: ignore[method-assign]


@given(st.sampled_from(sorted(HOSTILE)), st.integers(1, 200), st.integers(0, 2000))
def test_a_segment_is_tried_at_most_once_per_position(shape: str, k: int, n: int) -> None:
    # Each segment is placed at the leftmost position it fits after the one
    # before: the positions tried add up to at most the value's length plus
    # the number of segments (and each try costs at most the segment's length).
    compiled = compile_pattern(HOSTILE[shape](k))
    segments = compiled._tree.segments  # type: ignore[attr-defined]
    with counting_segment_tries() as tries:
        assert compiled.matches("a" * n) is False
    assert tries[0] <= n + len(segments) + 2


@pytest.mark.parametrize("shape", sorted(HOSTILE))
@pytest.mark.parametrize("k, n, budget", [(12, 40, 0.05), (200, 2000, 0.5)])
def test_hostile_patterns_answer_quickly(shape: str, k: int, n: int, budget: float) -> None:
    # Generous wall-clock bounds, for a loaded machine: the regular
    # expression took about a minute for k=12, n=40.
    pattern = HOSTILE[shape](k)
    started = time.perf_counter()
    compile_pattern(pattern).matches("a" * n)
    compile_pattern(pattern).matches("a" * n, ignore_case=True)
    assert time.perf_counter() - started < budget
