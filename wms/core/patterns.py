"""Grid Engine wildcard expressions: sge_types(1), "MATCHING TYPES".

A resource request such as ``-l arch="(lx*|sol*)&*64*"`` is a small boolean
expression over shell-style patterns. This module compiles such a text once
(:func:`compile_pattern` caches it) and matches it against the value a host
or queue offers. The rules below restate sge_types(1) ("expression",
"pattern"), complex(5) ("STRING" examples) and SPEC 000 section 5 ("String
matching"); where those documents and Grid Engine's own evaluator disagree
(examples.md section 9, items 1-4) we follow the evaluator, because the
worked examples in examples.md section 2 were produced by running it.

How a text is read
------------------
* A text that contains none of ``* ? [ ] & | ! ( )`` is not an expression:
  it is compared with the value as it stands, blanks and backslashes
  included (``'a b'`` matches only ``'a b'``; ``'x\\y'`` only ``'x\\y'``).
* Otherwise it is split into operands and the operators ``!`` (not),
  ``&`` (and), ``|`` (or) and parentheses. A blank ends an operand; blanks
  around operators are ignored, but two operands separated only by a blank
  are a syntax error (``'a b|c'``).
* ``!`` applies to the operand or parenthesised group right after it; ``&``
  binds tighter than ``|`` (``'a|b&c'`` is ``a | (b & c)``). sge_types(1)
  shows no precedence; the evaluator has this one (section 9, item 4).
* The operator characters always act as operators: ``\\|`` and ``\\&`` are
  not escapes (``'a\\|b'`` is the operand ``a\\`` or the operand ``b``), and
  ``|`` splits a bracket (``'lx2[4|6]-amd64'`` is ``lx2[4`` or ``6]-amd64``,
  matching neither ``lx24-amd64`` nor ``lx26-amd64``; complex(5) claims the
  opposite, SPEC 000 and the evaluator agree with us: section 9, item 1).
  For the same reason ``[!...]`` cannot be written (the ``!`` splits it,
  which is a syntax error).
* An operand containing ``* ? [ ]`` is a shell pattern, matched like
  fnmatch(3) with no flags: ``*`` is any run of characters (also ``/`` and
  a leading ``.``), ``?`` exactly one character, ``[...]`` one character of
  a set (ranges ``a-z``, POSIX classes ``[:digit:]``, a ``]`` right after
  the opening bracket is a member), ``\\c`` is the character ``c``. A
  bracket that is never closed stands for a literal ``[``. ``[^...]``
  negates the set, as glibc does; sge_types(1) says the caret is literal
  (section 9, item 2), but the expected results in examples.md were
  obtained with glibc and we keep them. A pattern operand ending in a lone
  backslash never matches (fnmatch's behaviour).
* An operand without ``* ? [ ]`` is compared literally, backslashes kept
  (section 9, item 3: ``'x\\y'`` matches ``'x\\y'`` but ``'x\\y*'`` matches
  ``'xy'``).
* Case-insensitive matching (complex types CSTRING and HOST) lower-cases
  both the expression and the value first.

What matching costs
-------------------
Patterns come from users (``-l``, ``-q``, quota set filters, reservations)
and are matched against every host and queue, so a shell pattern is matched
without backtracking, in time bounded by the pattern's length times the
value's (:class:`_Glob`). Translated into a regular expression with ``.*``
for each star, as it once was, the 23 characters ``*?*?*?*?*?*?*?*?*?*?*?Z``
given to ``wms submit -q`` took 75 seconds to answer and held the server
meanwhile (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from wms.core.errors import InvalidInput
from wms.core.limits import CEILING

# Characters that turn a text into an expression (sge_is_expression).
EXPRESSION_CHARS = frozenset("*?[]&|!()")
# Characters that make an operand a shell pattern rather than a literal.
WILDCARD_CHARS = frozenset("*?[]")
# Characters that end an operand.
_TERMINALS = frozenset("!|&() ")


# -- the compiled tree --------------------------------------------------------------
class _Node:
    def eval(self, value: str) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class _Literal(_Node):
    text: str

    def eval(self, value: str) -> bool:
        return value == self.text


@dataclass(frozen=True, slots=True)
class _Glob(_Node):
    """A shell pattern, as its segments: the runs between two stars (see _read_glob)."""

    segments: tuple[_Segment, ...] | None  # None: the pattern can never match

    def eval(self, value: str) -> bool:
        """Match without backtracking, in time linear in pattern x value.

        Without a star the one segment covers the value. Otherwise the
        first segment is anchored at the start, the last at the end, and
        each one between is placed at the leftmost position where it fits:
        every segment matches a fixed number of characters, so the
        leftmost place leaves the most room to the ones after it, and no
        other placement can succeed where that one fails.
        """
        segments = self.segments
        if segments is None:
            return False
        head = segments[0]
        if len(segments) == 1:
            return len(value) == head.size and head.at(value, 0)
        tail = segments[-1]
        end = len(value) - tail.size
        if end < head.size or not head.at(value, 0) or not tail.at(value, end):
            return False
        pos = head.size
        for segment in segments[1:-1]:
            found = segment.find(value, pos, end)
            if found < 0:
                return False
            pos = found + segment.size
        return True


@dataclass(frozen=True, slots=True)
class _Not(_Node):
    operand: _Node

    def eval(self, value: str) -> bool:
        return not self.operand.eval(value)


@dataclass(frozen=True, slots=True)
class _And(_Node):
    operands: tuple[_Node, ...]

    def eval(self, value: str) -> bool:
        return all(operand.eval(value) for operand in self.operands)


@dataclass(frozen=True, slots=True)
class _Or(_Node):
    operands: tuple[_Node, ...]

    def eval(self, value: str) -> bool:
        return any(operand.eval(value) for operand in self.operands)


@dataclass(frozen=True)
class Pattern:
    """A compiled sge_types(1) wildcard expression (see the module docstring)."""

    text: str
    _tree: _Node = field(repr=False, compare=False)

    def matches(self, value: str, *, ignore_case: bool = False) -> bool:
        """True when ``value`` satisfies the expression.

        ``ignore_case`` gives the CSTRING/HOST comparison of complex(5):
        expression and value are both lower-cased before matching.
        """
        if ignore_case:
            return compile_pattern(self.text.lower())._tree.eval(value.lower())
        return self._tree.eval(value)


# -- public helpers -----------------------------------------------------------------
def is_pattern(text: str) -> bool:
    """True when ``text`` is read as an expression (it has one of ``*?[]&|!()``),
    false when it is compared literally."""
    return any(char in EXPRESSION_CHARS for char in text)


@lru_cache(maxsize=4096)
def compile_pattern(text: str) -> Pattern:
    """Compile ``text`` (sge_types(1) "expression") once; the result is cached.

    Raises InvalidInput, naming the text and the position, when the text is
    not a well-formed expression (unbalanced parentheses, an operator where
    an operand belongs, two operands in a row, an unknown ``[:class:]``).
    """
    if not isinstance(text, str):
        raise InvalidInput(f"a wildcard expression must be a string, got {text!r}")
    if not is_pattern(text):
        return Pattern(text, _Literal(text))
    return Pattern(text, _Parser(text).parse())


def match_pattern(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """Shorthand for ``compile_pattern(pattern).matches(value, ignore_case=...)``."""
    return compile_pattern(pattern).matches(value, ignore_case=ignore_case)


# -- parsing the expression ---------------------------------------------------------
_END = "<end>"
_OPERAND = "<operand>"


class _Parser:
    """Recursive descent over the grammar

        or_expr  := and_expr ( "|" and_expr )*
        and_expr := unary ( "&" unary )*
        unary    := "!" unary | "(" or_expr ")" | operand
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0  # '!' and '(' being read: bounded, as the recursion is
        self.pos = 0
        self.kind = _END
        self.value = ""
        self.start = 0
        self._advance()

    def parse(self) -> _Node:
        tree = self._or()
        if self.kind != _END:
            self._fail(f"unexpected {self._describe()}; expected '&', '|' or the end")
        return tree

    # tokens
    def _advance(self) -> None:
        text = self.text
        while self.pos < len(text) and text[self.pos] == " ":
            self.pos += 1
        self.start = self.pos
        if self.pos >= len(text):
            self.kind, self.value = _END, ""
            return
        char = text[self.pos]
        if char in _TERMINALS:
            self.kind, self.value = char, char
            self.pos += 1
            return
        end = self.pos
        while end < len(text) and text[end] not in _TERMINALS:
            end += 1
        self.kind, self.value = _OPERAND, text[self.pos:end]
        self.pos = end

    def _describe(self) -> str:
        if self.kind == _END:
            return "end of expression"
        if self.kind == _OPERAND:
            return f"pattern {self.value!r}"
        return f"{self.kind!r}"

    def _fail(self, problem: str) -> None:
        shown = repr(self.text) if len(self.text) <= 60 else repr(self.text[:57] + "...")
        raise InvalidInput(f"invalid wildcard expression {shown}: {problem} at position {self.start + 1}")

    # grammar
    def _or(self) -> _Node:
        operands = [self._and()]
        while self.kind == "|":
            self._advance()
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else _Or(tuple(operands))

    def _and(self) -> _Node:
        operands = [self._unary()]
        while self.kind == "&":
            self._advance()
            operands.append(self._unary())
        return operands[0] if len(operands) == 1 else _And(tuple(operands))

    def _unary(self) -> _Node:
        if self.kind in ("!", "("):
            self.depth += 1
            if self.depth > CEILING.depth:
                self._fail(f"nested too deep (more than {CEILING.depth} levels of '!' and '(')")
            try:
                return self._nested()
            finally:
                self.depth -= 1
        if self.kind == _OPERAND:
            node = self._operand(self.value)
            self._advance()
            return node
        self._fail(f"unexpected {self._describe()}; expected a pattern, '!' or '('")
        raise AssertionError("unreachable")

    def _nested(self) -> _Node:
        if self.kind == "!":
            self._advance()
            return _Not(self._unary())
        self._advance()  # '('
        inner = self._or()
        if self.kind != ")":
            self._fail(f"unexpected {self._describe()}; expected ')'")
        self._advance()
        return inner

    def _operand(self, token: str) -> _Node:
        if not any(char in WILDCARD_CHARS for char in token):
            return _Literal(token)
        try:
            return _Glob(_read_glob(token))
        except ValueError as problem:
            self._fail(str(problem))
            raise AssertionError("unreachable") from None


# -- shell patterns (fnmatch with no flags), matched in linear time ------------------
# A pattern is read once into segments, the runs of single-character items
# between two stars, and matched without backtracking (_Glob.eval): the
# first segment at the start of the value, the last at its end, and every
# one in between at the leftmost place it fits after the one before (the
# module docstring, "What matching costs", says why not a regular expression).

_Range = tuple[str, str]

_POSIX_CLASSES: dict[str, tuple[_Range, ...]] = {
    "alpha": (("a", "z"), ("A", "Z")),
    "digit": (("0", "9"),),
    "alnum": (("a", "z"), ("A", "Z"), ("0", "9")),
    "upper": (("A", "Z"),),
    "lower": (("a", "z"),),
    "space": tuple((char, char) for char in " \t\n\r\f\v"),
    "blank": ((" ", " "), ("\t", "\t")),
    "punct": tuple((char, char) for char in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "xdigit": (("0", "9"), ("A", "F"), ("a", "f")),
    "cntrl": (("\x00", "\x1f"), ("\x7f", "\x7f")),
    "print": (("\x20", "\x7e"),),
    "graph": (("\x21", "\x7e"),),
}


# A range of at most this many characters is kept as the set of them.
_SPELLED_OUT = 256


@dataclass(frozen=True, slots=True)
class _CharSet:
    """A bracket expression ``[...]``: one character in (or, negated, not in) the ranges.

    Narrow ranges (the usual ``0-9``, ``a-z``, classes) are spelled out in
    ``members`` for a single lookup; only wide ones stay ``(low, high)``.
    """

    members: frozenset[str]
    wide: tuple[_Range, ...]
    negate: bool

    def __contains__(self, char: str) -> bool:
        found = char in self.members or any(low <= char <= high for low, high in self.wide)
        return found is not self.negate


def _charset(ranges: list[_Range], negate: bool) -> _CharSet:
    members: set[str] = set()
    wide: list[_Range] = []
    for low, high in ranges:
        if ord(high) - ord(low) < _SPELLED_OUT:
            members.update(chr(code) for code in range(ord(low), ord(high) + 1))
        else:
            wide.append((low, high))
    return _CharSet(frozenset(members), tuple(wide), negate)


# One item of a segment: a character, a set, or None for "?" (any character).
_Item = str | _CharSet | None


@dataclass(frozen=True, slots=True)
class _Segment:
    """A run of items between two stars, each matching exactly one character.

    ``literal`` is the text when every item is a plain character, so that
    the common case is compared by the string methods; otherwise ``checks``
    holds the items other than "?" with their offsets ("?" needs no test).
    """

    size: int  # characters matched
    literal: str | None
    checks: tuple[tuple[int, str | _CharSet], ...]

    def at(self, value: str, pos: int) -> bool:
        """True when the segment matches ``value`` at ``pos`` (which leaves room for it)."""
        if self.literal is not None:
            return value.startswith(self.literal, pos)
        for offset, item in self.checks:
            char = value[pos + offset]
            if (char != item) if isinstance(item, str) else (char not in item):
                return False
        return True

    def find(self, value: str, start: int, end: int) -> int:
        """The leftmost position in ``value[start:end]`` where the segment matches, or -1."""
        if self.literal is not None:
            return value.find(self.literal, start, end)
        for pos in range(start, end - self.size + 1):
            if self.at(value, pos):
                return pos
        return -1


def _segment(items: list[_Item]) -> _Segment:
    if all(isinstance(item, str) for item in items):
        return _Segment(len(items), "".join(items), ())  # type: ignore[arg-type]
    checks = tuple((offset, item) for offset, item in enumerate(items) if item is not None)
    return _Segment(len(items), None, checks)


def _read_glob(pattern: str) -> tuple[_Segment, ...] | None:
    """Read one shell pattern into its segments (split at each run of ``*``).

    Returns None for a pattern that can never match (a trailing lone
    backslash). Raises ValueError for an unknown ``[:class:]``.
    """
    segments: list[_Segment] = []
    items: list[_Item] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if not segments or items:  # a run of stars is one star
                segments.append(_segment(items))
            items = []
            i += 1
        elif char == "?":
            items.append(None)
            i += 1
        elif char == "\\":
            if i + 1 >= n:
                return None
            items.append(pattern[i + 1])
            i += 2
        elif char == "[":
            parsed = _bracket(pattern, i)
            if parsed is None:  # never closed: a literal "["
                items.append("[")
                i += 1
            else:
                charset, i = parsed
                items.append(charset)
        else:
            items.append(char)
            i += 1
    segments.append(_segment(items))
    return tuple(segments)


def _bracket(pattern: str, start: int) -> tuple[_CharSet, int] | None:
    """Read the set starting at ``pattern[start] == '['``.

    Returns (set, index after the closing ``]``), or None when the bracket
    is not closed.
    """
    i, n = start + 1, len(pattern)
    negate = i < n and pattern[i] in "!^"
    if negate:
        i += 1
    ranges: list[_Range] = []
    first = True
    while i < n:
        char = pattern[i]
        if char == "]" and not first:
            return _charset(ranges, negate), i + 1
        first = False
        if char == "[" and pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close != -1:
                name = pattern[i + 2:close]
                if name not in _POSIX_CLASSES:
                    raise ValueError(f"unknown character class '[:{name}:]'")
                ranges.extend(_POSIX_CLASSES[name])
                i = close + 2
                continue
        if char == "\\":
            if i + 1 >= n:
                return None
            char = pattern[i + 1]
            i += 1
        low = char
        i += 1
        # A range "x-y" (a "-" before the closing "]" is an ordinary member).
        if i + 1 < n and pattern[i] == "-" and pattern[i + 1] != "]":
            high = pattern[i + 1]
            step = 2
            if high == "\\":
                if i + 2 >= n:
                    return None
                high = pattern[i + 2]
                step = 3
            i += step
            if low <= high:  # "z-a" is empty
                ranges.append((low, high))
            continue
        ranges.append((low, low))
    return None
