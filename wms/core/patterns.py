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
"""

from __future__ import annotations

import re
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

_POSIX_CLASSES: dict[str, str] = {
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
    regex: re.Pattern[str] | None  # None: the pattern can never match

    def eval(self, value: str) -> bool:
        return self.regex is not None and self.regex.fullmatch(value) is not None


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
            regex = _glob_to_regex(token)
        except ValueError as problem:
            self._fail(str(problem))
            raise AssertionError("unreachable") from None
        return _Glob(None if regex is None else re.compile(regex, re.DOTALL))


# -- shell patterns (fnmatch with no flags) -----------------------------------------
def _glob_to_regex(pattern: str) -> str | None:
    """Translate one shell pattern to a regular expression for fullmatch.

    Returns None for a pattern that can never match (a trailing lone
    backslash). Raises ValueError for an unknown ``[:class:]``.
    """
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
            parsed = _bracket(pattern, i)
            if parsed is None:  # never closed: a literal "["
                out.append(re.escape("["))
                i += 1
            else:
                regex, i = parsed
                out.append(regex)
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _bracket(pattern: str, start: int) -> tuple[str, int] | None:
    """Read the set starting at ``pattern[start] == '['``.

    Returns (regex, index after the closing ``]``), or None when the
    bracket is not closed.
    """
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
                if name not in _POSIX_CLASSES:
                    raise ValueError(f"unknown character class '[:{name}:]'")
                members.append(_POSIX_CLASSES[name])
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
            if low <= high:
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            continue
        members.append(re.escape(low))
    return None
