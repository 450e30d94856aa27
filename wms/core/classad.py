"""ClassAd wrapper: the one module of ours that imports ``classad2``.

Implements DESIGN.md "Dependencies, chosen on purpose" (ClassAds through the
official HTCondor bindings, wrapped behind one module) and STYLE.md "ClassAd
wrapper"; the expression semantics are those of SPEC 004
(004_21b43ebe0db7c7ef.txt: job Requirements with ``other.`` references,
ternary operator, member()/strcat()/isUndefined()) as HTCondor's library
evaluates them.

Everything that leaves this module is plain Python: ``str``, ``int``,
``float``, ``bool``, ``None`` (ClassAd UNDEFINED), ``list``, ``dict`` (a
nested record) and :class:`Expression` (the text of anything that is not a
literal). Expressions are stored and passed around as text and compiled on
use, with a cache keyed on the text.

Behaviour of classad2 25 that shapes this module (measured):

- ``ClassAd(text)`` reports a syntax error without a position, ignores text
  after the closing ``]``, keeps the last of two equal attribute names and
  joins adjacent string literals; callers that need positions run
  :func:`tokenize` (ours) first, as :mod:`wms.core.jdl` does.
- ``1.`` (a number ending in a dot) is a syntax error: :func:`tokens_to_text`
  writes it as ``1.0``; ``#`` comments are not ClassAd and are only skipped by
  :func:`tokenize` when asked to.
- ``ExprTree.eval(None, target)`` gives wrong results for ``other.`` references
  (``other.X / 3600`` comes back as 2); an empty ClassAd is always passed as
  the scope instead.
- UNDEFINED and ERROR are ``IntEnum`` members, so they are checked before any
  ``int`` test.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, NamedTuple, TypeGuard

import classad2

from wms.core import limits as input_limits
from wms.core import regexps
from wms.core.errors import InvalidInput

__all__ = [
    "ClassAdEvalError",
    "ClassAdSyntaxError",
    "ClassAdValueError",
    "Expression",
    "Token",
    "check_patterns",
    "eval_bool",
    "external_refs",
    "own_record",
    "own_refs",
    "parse_record",
    "parse_checked_record",
    "render_name",
    "render_record",
    "render_value",
    "tokenize",
    "tokens_to_text",
]


@dataclass(frozen=True, slots=True)
class Expression:
    """A ClassAd expression that is not a literal, kept as its text."""

    text: str

    def __str__(self) -> str:
        return self.text


class ClassAdSyntaxError(InvalidInput):
    """ClassAd text that cannot be read; ``line``/``col`` are 1-based."""

    def __init__(self, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(message, where=f"{line}:{col}")
        self.line = line
        self.col = col


class ClassAdValueError(ClassAdSyntaxError):
    """classad2 accepted a record's text but raised on one of its values:
    ``why`` is what it said, on one line."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


class ClassAdEvalError(InvalidInput):
    """classad2 raised while evaluating an expression; ``where`` is what the
    caller names (the attribute, ``job 3: Requirements``), when it does."""


#: What classad2 raises on text or arguments it cannot take: its own
#: ClassAdException, and the Python exceptions of its conversions
#: (``absTime("\\u0000")`` is a ValueError, year -1 is out of range).
#: Every one of them becomes a ClassAdSyntaxError or a ClassAdEvalError
#: here, so a user's expression is a 400 wherever it is read, never a 500.
LIBRARY_ERRORS: tuple[type[BaseException], ...] = (
    classad2.ClassAdException, ValueError, ArithmeticError, TypeError, RecursionError,
)
#: The longest text of a library failure or of an expression put in a message.
SHOWN_MAX = 200


def _one_line(text: str, limit: int = SHOWN_MAX) -> str:
    """*text* on one line (runs of blanks and control characters as one
    space), cut to *limit* characters: a message never echoes a huge input."""
    text = " ".join(_UNPRINTABLE_RE.sub(" ", text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _library_why(exc: BaseException) -> str:
    """What classad2 said, on one line: its message, else the exception's name."""
    return _one_line(str(exc)) or type(exc).__name__


# --------------------------------------------------------------------------
# Tokenizer (ours: classad2 gives no positions)
# --------------------------------------------------------------------------

STRING = "string"  # "..."
NAME = "name"  # '...' : a quoted attribute name
NUMBER = "number"
IDENT = "ident"
OP = "op"
PUNCT = "punct"  # [ ] { } ( ) , ; and the assignment =


class Token(NamedTuple):
    kind: str
    text: str
    line: int
    col: int
    start: int  # offset of the first character in the source
    end: int  # offset after the last character


_OPERATORS = (  # longest first: the first that matches is taken
    ">>>", "=?=", "=!=",
    "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
    "<", ">", "+", "-", "*", "/", "%", "!", "~", "&", "|", "^", "?", ":", ".",
)
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_TAIL_RE = re.compile(r"[A-Za-z0-9_.]*")
_VALUE_END_KINDS = frozenset({STRING, NAME, NUMBER, IDENT})
_NEWLINE_RE = re.compile("\n")
_UNPRINTABLE_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _token_regex(hash_comments: bool) -> re.Pattern[str]:
    """The tokenizer's one regex: blanks and comments, then one token.

    Each match skips what lies before a token and captures the token in the
    group named after its kind, so :func:`tokenize` makes one regex call per
    token instead of looping over characters in Python. The alternatives are
    tried in the order the rules below are listed, which is what decides
    between overlapping ones (``==`` before ``=``, ``.5`` before ``.``).
    """
    skip = [
        r"[ \t\r\f\v\n]++",  # blanks (no \s: it also takes Unicode spaces)
        r"//[^\n]*+",  # a // comment runs to the end of the line
        r"/\*(?s:.*?)\*/",  # /* */ ends at the first */ after the /*
    ]
    if hash_comments:
        skip.append(r"\#[^\n]*+")
    # The skip loop is possessive: blanks are never given back, so a failure
    # cannot backtrack through every way of splitting a run of blanks.
    skip_re = "(?:" + "|".join(skip) + ")*+"
    operators = "|".join(re.escape(op) for op in _OPERATORS)
    # Strings end on their own line; a backslash escapes any character but a
    # newline. Written as an unrolled loop: linear even when unterminated.
    string = r'"[^"\\\n]*+(?:\\[^\n][^"\\\n]*+)*+"'
    name = r"'[^'\\\n]*+(?:\\[^\n][^'\\\n]*+)*+'"
    return re.compile(
        skip_re
        + "(?:"
        + f"(?P<{STRING}>{string})"
        + f"|(?P<{NAME}>{name})"
        + rf"|(?P<{NUMBER}>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
        # .5 is a number only where no value ends just before it (else the
        # dot is an operator: a.5); tokenize decides, knowing the previous token
        + r"|(?P<dot_number>\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
        + rf"|(?P<{IDENT}>[A-Za-z_][A-Za-z0-9_]*)"
        # a /* that the blanks and comments above did not take has no */
        + r"|(?P<open_comment>/\*)"
        # an assignment = is punctuation, tried after ==, =?= and =!=
        + f"|(?P<{OP}>{operators})"
        + rf"|(?P<{PUNCT}>[\[\]{{}}(),;=])"
        + r"|(?P<end>\Z)"
        # anything else is an error: an unterminated string, a character
        # ClassAds do not use
        + r"|(?P<bad>(?s:.))"
        + ")"
    )


_TOKEN_RE = _token_regex(hash_comments=False)
_HASH_TOKEN_RE = _token_regex(hash_comments=True)
# Tokens built with tuple.__new__ skip NamedTuple's Python-level __new__
# (measurably faster for the tens of tokens of every JDL).
_new_token = partial(tuple.__new__, Token)


def tokenize(text: str, *, hash_comments: bool = False) -> list[Token]:
    """Split ClassAd text into tokens with their line and column.

    Skips blanks, ``//`` and ``/* */`` comments, and ``#`` line comments when
    *hash_comments* is set (JDL files use them; ClassAds do not). A string
    must end on the line it starts on. Raises :class:`ClassAdSyntaxError` at
    the offending character.
    """
    scan = (_HASH_TOKEN_RE if hash_comments else _TOKEN_RE).match
    # Line and column come from the offset: the newlines before it give the
    # line, the last of them the column (one-line texts need no search).
    newlines = [m.start() for m in _NEWLINE_RE.finditer(text)] if "\n" in text else None
    tokens: list[Token] = []
    append = tokens.append
    pos = 0
    while True:
        match = scan(text, pos)
        assert match is not None  # the "bad" alternative takes any character
        kind = match.lastgroup
        assert kind is not None  # every alternative is a named group
        start, pos = match.span(kind)
        if newlines is None:
            line, col = 1, start + 1
        else:
            before = bisect_left(newlines, start)  # newlines before the token
            line = before + 1
            col = start - newlines[before - 1] if before else start + 1
        if kind == NUMBER or kind == "dot_number":
            if kind == "dot_number":
                prev = tokens[-1] if tokens else None
                if prev is not None and (prev.kind in _VALUE_END_KINDS or prev.text in (")", "]")):
                    append(_new_token((OP, ".", line, col, start, start + 1)))
                    pos = start + 1  # the digits are read as a number next
                    continue
                kind = NUMBER
            if pos < len(text) and (text[pos].isalnum() or text[pos] == "_"):
                bad = _WORD_TAIL_RE.match(text, start)
                assert bad is not None
                raise ClassAdSyntaxError(f"malformed number {bad.group()!r}", line, col)
        elif kind == "end":
            return tokens
        elif kind == "open_comment":
            raise ClassAdSyntaxError("unterminated comment: '/*' without '*/'", line, col)
        elif kind == "bad":
            c = text[start]
            if c == '"':
                raise ClassAdSyntaxError("unterminated string", line, col)
            if c == "'":
                raise ClassAdSyntaxError("unterminated quoted attribute name", line, col)
            raise ClassAdSyntaxError(f"unexpected character {c!r}", line, col)
        append(_new_token((kind, text[start:pos], line, col, start, pos)))


_BARE_DOT_RE = re.compile(r"\.(?=$|[eE])")


def tokens_to_text(tokens: list[Token]) -> str:
    """Write tokens back as ClassAd text that classad2 accepts.

    Tokens that touched in the source still touch (``-5`` stays a literal,
    ``- 5`` would be an expression); comments become one blank; a number
    ending in ``.`` gets a ``0``.
    """
    parts: list[str] = []
    prev_end: int | None = None
    for tok in tokens:
        if prev_end is not None and tok.start != prev_end:
            parts.append(" ")
        parts.append(_BARE_DOT_RE.sub(".0", tok.text) if tok.kind == NUMBER else tok.text)
        prev_end = tok.end
    return "".join(parts)


# --------------------------------------------------------------------------
# classad2 values -> plain Python
# --------------------------------------------------------------------------


_PLAIN_TYPES = frozenset({str, int, float, bool})  # exact types: not Value (an IntEnum)


def _to_python(value: Any) -> Any:
    if type(value) in _PLAIN_TYPES:  # the common case, decided without the chain below
        return value
    if isinstance(value, classad2.Value):  # before int: Value is an IntEnum
        return None if value == classad2.Value.Undefined else Expression("error")
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, classad2.ExprTree):
        return Expression(str(value).strip())
    if isinstance(value, classad2.ClassAd):
        return {key: _to_python(value[key]) for key in value}  # faster than .items()
    if isinstance(value, list):
        return [_to_python(item) for item in value]
    if isinstance(value, _dt.datetime):
        return Expression(f'absTime("{value.isoformat()}")')
    raise TypeError(f"unexpected ClassAd value of type {type(value).__name__}")


# {lowercase name: (position in the source, RecordOrder of the value when it
# is a record literal)}
RecordOrder = dict[str, tuple[int, "RecordOrder | None"]]


def _record_orders(tokens: list[Token], i: int) -> tuple[RecordOrder, int]:
    """Source order of the keys of the record whose ``[`` is tokens[i].

    Returns ``{lowercase name: (position, order of its value if a record)}``
    and the index after the closing ``]``. Lenient: the text has already been
    accepted by classad2.
    """
    order: RecordOrder = {}
    depth, i, expect_name = 0, i + 1, True
    while i < len(tokens):
        tok = tokens[i]
        if depth == 0:
            if tok.text == "]" and tok.kind == PUNCT:
                return order, i + 1
            if tok.text == ";" and tok.kind == PUNCT:
                expect_name = True
                i += 1
                continue
            if expect_name and tok.kind in (IDENT, NAME) and i + 1 < len(tokens) and tokens[i + 1].text == "=":
                name = _unquote_name(tok.text) if tok.kind == NAME else tok.text
                sub = None
                i += 2
                if i < len(tokens) and tokens[i].text == "[":
                    sub, i = _record_orders(tokens, i)
                    if i < len(tokens) and tokens[i].text not in (";", "]"):
                        sub = None  # the record is part of a larger expression
                order.setdefault(name.lower(), (len(order), sub))
                expect_name = False
                continue
        if tok.kind == PUNCT and tok.text in "[{(":
            depth += 1
        elif tok.kind == PUNCT and tok.text in "]})":
            depth -= 1
        expect_name = False
        i += 1
    return order, i


def _reorder(record: dict[str, Any], order: RecordOrder | None) -> dict[str, Any]:
    if not order:
        return record
    # (position in the source, position in the record, key, order inside):
    # keys the order does not know go last, keeping their relative order
    missing = (len(order), None)
    ranked = []
    for n, key in enumerate(record):
        position, sub = order.get(key.lower(), missing)
        ranked.append((position, n, key, sub))
    ranked.sort()  # (position, n) is unique: key and sub are never compared
    result: dict[str, Any] = {}
    for _, _, key, sub in ranked:
        value = record[key]
        result[key] = _reorder(value, sub) if isinstance(value, dict) else value
    return result


def _unquote_name(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _guard(text: str) -> None:
    """Refuse text classad2 could not take safely (wms.core.limits: nesting
    and operator chains that would exhaust its stack, NUL, lone surrogates)."""
    try:
        input_limits.scan_classad(text, "ClassAd", input_limits.STORED, what="ClassAd")
    except InvalidInput as exc:
        line, col = _line_col(exc.where)
        raise ClassAdSyntaxError(exc.message, line, col) from None


def _line_col(where: str | None) -> tuple[int, int]:
    parts = (where or "").rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return int(parts[1]), int(parts[2])
    return 1, 1


def parse_record(text: str) -> dict[str, Any]:
    """Parse one ClassAd record ``[ name = value; ... ]`` into plain Python.

    Literals become ``str``/``int``/``float``/``bool``, UNDEFINED ``None``,
    lists ``list``, nested records ``dict``; anything else (an expression,
    ERROR, an ``absTime``) becomes an :class:`Expression`. Keys keep their
    source order and casing. Raises :class:`ClassAdSyntaxError`.
    """
    _guard(text)
    tokens = tokenize(text)
    if not tokens or tokens[0].text != "[":
        line, col = (tokens[0].line, tokens[0].col) if tokens else (1, 1)
        raise ClassAdSyntaxError("a ClassAd record must start with '['", line, col)
    _check_balanced(tokens)
    order, end = _record_orders(tokens, 0)
    if end != len(tokens):
        tok = tokens[end]
        raise ClassAdSyntaxError("unexpected text after the closing ']'", tok.line, tok.col)
    check_operands(tokens)
    check_patterns(tokens)
    return parse_checked_record(tokens_to_text(tokens), order)


def parse_checked_record(text: str, order: RecordOrder | None) -> dict[str, Any]:
    """The last step of :func:`parse_record`, for callers that have already
    tokenized and checked the text (as :mod:`wms.core.jdl` does) and so need
    not tokenize it again.

    *text* is one ClassAd record, written as :func:`tokens_to_text` writes
    it (comments gone, ``1.`` as ``1.0``); *order* gives the source order of
    its keys: ``{lowercase name: (position, order of the value if it is a
    record literal, else None)}``.
    """
    if order is not None and not order:
        return {}                       # "[ ]", which _parse_ad does not take
    ad = _parse_ad(text)
    if ad is None:
        raise ClassAdSyntaxError("cannot parse the ClassAd record")
    record: dict[str, Any] = {}
    for key in ad:
        try:
            record[key] = _to_python(ad[key])
        except LIBRARY_ERRORS as exc:
            # classad2 folds a call on literals when it reads the text:
            # X = absTime("\\u0000") fails only when X is taken out
            why = _library_why(exc)
            raise ClassAdValueError(f"the ClassAd library failed on the value of {_one_line(key, 60)}: {why}",
                                    why) from None
    return _reorder(record, order)


def _parse_ad(text: str) -> classad2.ClassAd | None:
    """The ClassAd of *text*, a record of at least one attribute in the new
    syntax; None when classad2 cannot read it.

    Through parseNext, not ``classad2.ClassAd(text)``: in classad2 25 each
    ClassAd made by its constructor (from text, a dict or nothing) keeps
    about 150 bytes of native memory for good, so a server reading a job's
    JDL for every match grew by megabytes a minute (docs/architecture.md).
    An ad that parseNext makes is freed whole. Both read the first record
    of the text alike; parseNext gives None for a record without attributes,
    which no caller here passes.
    """
    try:
        return classad2.parseNext(text, classad2.ParserType.New)
    except LIBRARY_ERRORS:
        return None


_CLOSERS = {"[": "]", "{": "}", "(": ")"}


def _check_balanced(tokens: list[Token]) -> None:
    stack: list[Token] = []
    for tok in tokens:
        if tok.kind != PUNCT:
            continue
        if tok.text in _CLOSERS:
            stack.append(tok)
        elif tok.text in ")]}":
            if not stack:
                raise ClassAdSyntaxError(f"unexpected {tok.text!r}", tok.line, tok.col)
            opener = stack.pop()
            if _CLOSERS[opener.text] != tok.text:
                raise ClassAdSyntaxError(
                    f"mismatched {tok.text!r}: {opener.text!r} at {opener.line}:{opener.col} "
                    f"is closed by {_CLOSERS[opener.text]!r}",
                    tok.line,
                    tok.col,
                )
    if stack:
        raise ClassAdSyntaxError(f"{stack[-1].text!r} is not closed", stack[-1].line, stack[-1].col)


_LEADING_ZERO_RE = re.compile(r"0[0-9]+")
_PREFIX_OPERATORS = frozenset({"-", "+", "!", "~"})
_PREFIX_ONLY = frozenset({"!", "~"})
_INFIX_WORDS = frozenset({"is", "isnt"})
#: Words that are values or operators, never an attribute's or a function's name.
_KEYWORDS = frozenset({"true", "false", "undefined", "error", "is", "isnt"})
#: What separates the items of each kind of group.
_SEPARATOR = {"record": ";", "list": ",", "call": ",", "parentheses": None, "subscript": None, "top": None}


def _is_name(tok: Token) -> bool:
    return tok.kind == NAME or tok.kind == IDENT and tok.text.lower() not in _KEYWORDS


def _is_dot(tok: Token | None) -> TypeGuard[Token]:
    return tok is not None and tok.kind == OP and tok.text == "."


def check_operands(tokens: list[Token]) -> None:
    """The shape of balanced ClassAd tokens (:func:`_check_balanced`), as
    classad2 reads it: operands and operators in turn, every ``?`` with its
    ``:``, a name after each ``.``, ``name = value`` in records, commas in
    lists and calls only, nothing empty where a value belongs.

    classad2 keeps some native memory for every text it fails to parse
    (docs/architecture.md, "Memory stays flat under load"), so mistakes
    are found here, with a position, before it sees the text: ``1 +``,
    ``* 2``, ``1 2``, ``x ? 1``, ``1 : 2``, ``x.``, ``()``, ``x[]``,
    ``[a = 1, b = 2]``. One pass, one token of memory and a stack of the
    open groups: precedence does not matter for whether a text can be
    read. The prefix operators are ``- + ! ~``; ``?:`` (a blank between or
    not) gives a default; ``.x`` is an absolute reference; ``f(x)`` a
    call, ``x[0]`` a subscript. Two slips that classad2 reads or refuses
    by what surrounds them are refused always: a whole number with a
    leading 0 (``01``: octal, or a failure) and a doubled dot (``a..b``).
    tests/fuzz/test_parsers.py holds the check to classad2's verdict.
    """
    expect = True                 # the next token must start an operand
    after: Token | None = None    # the operator that operand comes after
    prev: Token | None = None
    kind_of_group = "top"
    questions = 0                 # '?' of this group waiting for their ':'
    name_next = False             # in a record, where an attribute's name goes
    equals_next = False           # and its '='
    elvis: Token | None = None    # the ':' of a ?: just read
    selected = False              # prev is a name after '.'
    named = False                 # a record has had an attribute
    groups: list[tuple[Token, str, int, bool]] = []    # opener; the outer group's kind, questions, named

    def fail(message: str, tok: Token) -> None:
        raise ClassAdSyntaxError(message, tok.line, tok.col)

    def item_ends(tok: Token) -> None:
        if expect and after is not None:
            fail(f"missing operand after {after.text!r}", after)
        if questions:
            fail("'?' without its ':'", tok)

    for tok in tokens:
        kind, text = tok.kind, tok.text
        if elvis is not None and elvis is not prev:
            # right after ?: classad2 takes no prefix operator, only a negative number: -1, not - 1
            if prev is not None and prev.kind == OP and prev.text != "." and not (
                    prev.text == "-" and kind == NUMBER and tok.start == prev.end):
                fail(f"{prev.text!r} right after '?:': put the value in parentheses", prev)
            elvis = None
        if _is_dot(prev) and not _is_name(tok):
            fail("expected an attribute name after '.'", prev)
        if name_next and not (kind == PUNCT and text in ";]"):
            if not _is_name(tok):
                fail(f"expected an attribute name, got {tok.text!r}", tok)
            name_next, equals_next, named = False, True, True
            prev = tok
            continue
        if equals_next:
            if not (kind == PUNCT and text == "="):
                fail(f"expected '=' after the attribute name {prev.text if prev else ''}", tok)
            equals_next = False
            expect, after, prev = True, tok, tok
            continue
        if kind == OP or (kind == IDENT and text.lower() in _INFIX_WORDS):
            if text == "." or (expect and text in _PREFIX_OPERATORS):
                expect, after = True, tok
            elif text in _PREFIX_ONLY:
                fail(f"expected an operator before {text!r}", tok)
            elif expect and text == ":" and prev is not None and prev.kind == OP and prev.text == "?":
                questions -= 1            # x ? : y, the same as x ?: y
                after = elvis = tok
            elif expect:
                fail(f"missing operand before {text!r}", tok)
            else:
                if text == "?":
                    questions += 1
                elif text == ":":
                    if not questions:
                        fail("':' without a '?' before it", tok)
                    questions -= 1
                expect, after = True, tok
        elif kind == PUNCT and text in "([{":
            if expect:
                inner = {"(": "parentheses", "{": "list", "[": "record"}[text]
            elif text == "(" and prev is not None and _is_name(prev) and not selected:
                inner = "call"
            elif text == "[":
                inner = "subscript"
            else:
                fail(f"expected an operator before {text!r}", tok)
            groups.append((tok, kind_of_group, questions, named))
            kind_of_group, questions, expect, after, named = inner, 0, True, None, False
            name_next = inner == "record"
        elif kind == PUNCT and text in ")]}":
            item_ends(tok)
            if prev is not None and prev.kind == PUNCT and prev.text == ",":
                fail(f"expected a value after ',', got {text!r}", tok)
            opener, outer, outer_questions, outer_named = groups.pop()
            if prev is opener and kind_of_group in ("parentheses", "subscript"):
                fail(f"nothing between {opener.text!r} and {text!r}", opener)     # () or x[]
            if kind_of_group == "record" and not named and prev is not opener:
                fail("a record of nothing but ';'", opener)                       # [;]
            kind_of_group, questions, expect, after, named = outer, outer_questions, False, None, outer_named
            name_next = False
        elif kind == PUNCT and text in ",;":
            if _SEPARATOR[kind_of_group] != text:
                fail(f"unexpected {text!r}", tok)
            if not (text == ";" and expect and after is None):     # [a = 1;; b = 2]
                item_ends(tok)
                if text == "," and expect:
                    fail("expected a value before ','", tok)
            expect, after = True, None
            name_next = text == ";"
        elif kind == PUNCT:               # '=' where no attribute's name is before it
            fail("unexpected '='", tok)
        elif not expect and not (kind in (STRING, NAME) and prev is not None and prev.kind == kind):
            # ("a" "b" is one string to classad2, and 'a' 'b' one name)
            fail(f"expected an operator before {text!r}", tok)
        elif kind == NUMBER and _LEADING_ZERO_RE.fullmatch(text):
            # classad2 reads such a number as octal, or fails, by what follows it
            fail(f"a whole number does not start with 0 ({text!r})", tok)
        else:
            expect, after = False, None
        selected = _is_dot(prev)          # x.f( is no call
        prev = tok
    if _is_dot(prev):
        fail("expected an attribute name after '.'", prev)
    if tokens:
        item_ends(tokens[-1])


#: The ClassAd functions whose first argument is a PCRE pattern (names ignore case).
PATTERN_FUNCTIONS = frozenset({"regexp", "regexps", "regexpmember", "stringlistregexpmember", "replace",
                               "replaceall"})


def check_patterns(tokens: list[Token]) -> None:
    """Refuse, at its place, every pattern function call (:data:`PATTERN_FUNCTIONS`)
    whose pattern may backtrack catastrophically (:mod:`wms.core.regexps`) or
    is not a string literal.

    A computed pattern (``regexp(other.X, ...)``, ``regexp(strcat(..), ...)``)
    is refused: it cannot be checked before it is run, and the pilot or the
    queue would choose what the job's expression costs. *tokens* are
    balanced (:func:`_check_balanced` has run).
    """
    for i, tok in enumerate(tokens):
        if tok.kind != IDENT or tok.text.lower() not in PATTERN_FUNCTIONS:
            continue
        if i + 1 >= len(tokens) or tokens[i + 1].text != "(" or tokens[i + 1].kind != PUNCT:
            continue
        if i and _is_dot(tokens[i - 1]):
            continue                     # other.regexp(: an attribute, not a call
        argument: list[Token] = []
        depth = 0
        for arg in tokens[i + 2:]:
            if arg.kind == PUNCT and arg.text in "([{":
                depth += 1
            elif arg.kind == PUNCT and arg.text in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and arg.kind == PUNCT and arg.text == ",":
                break
            argument.append(arg)
        name = tok.text
        if not argument:
            continue                     # classad2 answers ERROR for a call without arguments
        if any(arg.kind != STRING for arg in argument):
            first = argument[0]
            raise ClassAdSyntaxError(f"{name}(): the pattern must be a string literal (a computed pattern "
                                     "cannot be checked before it runs)", first.line, first.col)
        try:
            pattern = "".join(classad2.unquote(arg.text) for arg in argument)
        except LIBRARY_ERRORS as exc:
            raise ClassAdSyntaxError(f"{name}(): cannot read the pattern: {_library_why(exc)}",
                                     argument[0].line, argument[0].col) from None
        try:
            regexps.check_pattern(pattern)
        except regexps.PatternRefused as exc:
            shown = _one_line(pattern, 60)
            raise ClassAdSyntaxError(f"{name}(): pattern {shown!r} refused at its character {exc.offset + 1}: "
                                     f"{exc.message} (docs/security.md, \"Evaluation cost\")",
                                     argument[0].line, argument[0].col) from None


# --------------------------------------------------------------------------
# Rendering plain Python as ClassAd text
# --------------------------------------------------------------------------

_RESERVED = frozenset({"true", "false", "undefined", "error", "is", "isnt", "my", "target", "other", "parent"})
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\\\"]")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _ESCAPES.get(c) or f"\\{ord(c):03o}"


def _quote(text: str, quote: str = '"') -> str:
    # most strings need no escape: skip the substitution for them
    body = text if _CONTROL_RE.search(text) is None else _CONTROL_RE.sub(_escape, text)
    if quote == "'":
        body = body.replace('\\"', '"').replace("'", "\\'")
    return f"{quote}{body}{quote}"


@lru_cache(maxsize=4096)  # the same few names come back in every job
def render_name(name: str) -> str:
    """An attribute name as ClassAd text: bare if it can be, else ``'quoted'``."""
    if _IDENT_RE.fullmatch(name) and name.lower() not in _RESERVED:
        return name
    return _quote(name, "'")


def render_value(value: Any) -> str:
    """One plain-Python value as ClassAd text (nested records on one line)."""
    if type(value) is str:  # the most common value, tested first
        return _quote(value)
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'real("NaN")'
        if math.isinf(value):
            return 'real("INF")' if value > 0 else '-real("INF")'
        return repr(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, Expression):
        return value.text
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(render_value(item) for item in value) + "}"
    if isinstance(value, Mapping):
        if not value:
            return "[ ]"
        return "[ " + "; ".join(f"{render_name(k)} = {render_value(v)}" for k, v in value.items()) + " ]"
    if isinstance(value, _dt.datetime):
        return f'absTime("{value.isoformat()}")'
    raise TypeError(f"cannot write a {type(value).__name__} as a ClassAd value")


def render_record(record: Mapping[str, Any]) -> str:
    """A record as ClassAd/JDL text, one attribute per line."""
    lines = ["["]
    lines.extend(f"  {render_name(k)} = {render_value(v)};" for k, v in record.items())
    lines.append("]")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _compile(text: str) -> tuple[classad2.ExprTree, classad2.ClassAd]:
    """The ExprTree of *text*, with the ad that owns it (kept alive with it)."""
    _guard(text)
    tokens = tokenize(text)
    if not tokens:
        raise ClassAdSyntaxError("empty expression")
    _check_balanced(tokens)
    check_operands(tokens)
    check_patterns(tokens)
    ad = _parse_ad(f"[__wms_expr__ = (\n{tokens_to_text(tokens)}\n)]")
    if ad is None or len(ad) != 1:
        raise ClassAdSyntaxError(f"cannot parse the expression {_one_line(text, 80)!r}")
    return ad.lookup("__wms_expr__"), ad


@lru_cache(maxsize=1024)
def _ad_from_text(text: str) -> classad2.ClassAd:
    _guard(text)
    ad = _parse_ad(text)
    if ad is None:
        raise ClassAdSyntaxError("cannot turn the record into a ClassAd")
    return ad


#: An ad is given as a record of plain Python or as the text of one (a
#: stored ad: its text is the cache key, so it is parsed once).
Ad = Mapping[str, Any] | str | None


def _ad(record: Ad) -> classad2.ClassAd:
    if isinstance(record, str):
        return _ad_from_text(record)
    return _ad_from_text(render_record(record)) if record else _EMPTY_AD


def _evaluate(expr_text: str, my: Ad, target: Ad) -> Any:
    expr, _owner = _compile(expr_text)
    return expr.eval(_ad(my), _ad(target))


def _eval_failed(expr_text: str, exc: BaseException, where: str | None) -> ClassAdEvalError:
    """The one error of an expression classad2 raised on (see LIBRARY_ERRORS)."""
    return ClassAdEvalError(
        f"cannot evaluate {_one_line(expr_text, 80)}: the ClassAd library failed: {_library_why(exc)}", where=where
    )


def eval_bool(
    expr_text: str, my: Ad = None, target: Ad = None,
    *, where: str | None = None,
) -> bool | None:
    """Evaluate *expr_text* as a condition: ``True``, ``False`` or ``None``.

    ``None`` means UNDEFINED or ERROR (a Requirements that gives ``None``
    does not match). Numbers count as conditions the way HTCondor's
    ``matches()`` counts them (non-zero is true); any other type is ``None``.
    Raises :class:`ClassAdSyntaxError` when the text is not an expression
    and :class:`ClassAdEvalError` (naming *where*) when classad2 raises on it.
    """
    try:
        result = _evaluate(expr_text, my, target)
    except LIBRARY_ERRORS as exc:
        raise _eval_failed(expr_text, exc, where) from None
    if isinstance(result, classad2.Value):
        return None
    if result is True or result is False:
        return result
    if isinstance(result, (int, float)):
        return result != 0
    return None


_TARGET_PREFIXES = ("other.", "target.")


def external_refs(expr_text: str) -> list[str]:
    """Names of the attributes *expr_text* reads from the other ad.

    The ``other.X`` / ``target.X`` references, returned as ``X`` (the first
    name after the scope: ``other.info.Y`` gives ``info``), without
    duplicates (names ignore case) and sorted; unscoped and ``my.`` names are
    left out. Uses ClassAd.externalRefs against an empty ad and drops the
    empty strings it returns.
    """
    names: dict[str, str] = {}
    for ref in _references(expr_text):
        lowered = ref.lower()
        for prefix in _TARGET_PREFIXES:
            if lowered.startswith(prefix) and len(ref) > len(prefix):
                name = _first_name(ref[len(prefix):])
                names.setdefault(name.lower(), name)
    return sorted(names.values(), key=str.lower)


def _references(expr_text: str) -> list[str]:
    """The references classad2 finds in *expr_text* (against an empty ad), stripped, empty ones left out."""
    expr, _owner = _compile(expr_text)
    try:
        refs = _EMPTY_AD.externalRefs(expr)
    except LIBRARY_ERRORS as exc:
        raise _eval_failed(expr_text, exc, None) from None
    return [ref for ref in (ref.strip() for ref in refs) if ref]


def _first_name(ref: str) -> str:
    """The first name of a reference (``info`` of ``info.Y``), a quoted one unquoted."""
    name = ref.split(".", 1)[0]
    if name.startswith("'") and name.endswith("'") and len(name) > 1:
        name = _unquote_name(name)
    return name


def own_refs(expr_text: str, *, unscoped_only: bool = False) -> list[str]:
    """Names of the attributes *expr_text* may read from its own ad.

    The ``my.X`` references (left out when *unscoped_only*) and the
    unscoped names (``X``), as ``X`` (the first name: ``my.info.Y`` gives
    ``info``), without duplicates (names ignore case) and sorted. An
    unscoped name the own ad does not define is looked up in the other ad
    when the expression is evaluated, so these are the names to look for
    in the own ad, not all of them need be there.
    """
    names: dict[str, str] = {}
    for ref in _references(expr_text):
        lowered = ref.lower()
        if lowered.startswith(_TARGET_PREFIXES):
            continue
        if lowered.startswith("my.") and len(ref) > 3:
            if unscoped_only:
                continue
            ref = ref[3:]
        name = _first_name(ref)
        names.setdefault(name.lower(), name)
    if unscoped_only:
        # classad2 reports my.X as X: keep the names written at least once without a scope.
        tokens = tokenize(expr_text)
        written = {tok.text.lower() for i, tok in enumerate(tokens)
                   if tok.kind == IDENT and not (i and _is_dot(tokens[i - 1]))}
        names = {key: name for key, name in names.items() if key in written}
    return sorted(names.values(), key=str.lower)


def own_record(expr_text: str, record: Mapping[str, Any], *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """The part of *record* that *expr_text* reads as its own ad.

    Every attribute of *record* the expression names unscoped or with
    ``my.`` (:func:`own_refs`), and, when such a value is itself an
    expression, the attributes that one names in turn; names in
    *leave_out* (the expression's own attribute, say) are never taken.
    Keys keep the record's casing and are sorted ignoring case, so the same
    content gives the same record (and the same text) whatever the order of
    the source.
    """
    by_name = {key.lower(): key for key in record}
    skip = {name.lower() for name in leave_out}
    taken: dict[str, str] = {}
    pending = [expr_text]
    while pending:
        for name in own_refs(pending.pop()):
            lowered = name.lower()
            key = by_name.get(lowered)
            if key is None or lowered in skip or lowered in taken:
                continue
            taken[lowered] = key
            value = record[key]
            if isinstance(value, Expression):
                pending.append(value.text)
    return {key: record[key] for _, key in sorted(taken.items())}


_EMPTY_AD = classad2.ClassAd()
