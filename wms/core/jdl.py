"""Job descriptions: parse a JDL (ClassAd syntax) into typed jobs.

Implements INTERFACE.md "The job description (JDL, ClassAd syntax)", with the
cases of reference/examples.md section 7: J1 (DIRAC keywords and sandboxes),
J2 (the RFC #7 Requirements section of SPEC 002_610d46030dd95101.txt), J4
(a ClassAd Requirements expression with ``other.`` references, SPEC
004_21b43ebe0db7c7ef.txt) and J7 (parser edge cases); parametric JDLs (J3)
are expanded by :mod:`wms.core.parametric`.

Reading happens in three steps:

1. Our own tokenizer and structure check (classad2 gives no positions and
   accepts some mistakes silently) refuse, with ``source:line:col``: an
   unterminated string or comment, unbalanced or mismatched brackets, list
   items without a comma between them (``{"a" "b"}``, which classad2 would
   join into one string), a duplicated attribute (names ignore case), an
   attribute without ``=``, text after the closing ``]`` and an empty JDL.
   The outer ``[ ]`` may be left out (as DIRAC's client allows); ``//``,
   ``/* */`` and ``#`` comments are skipped outside strings.
2. classad2 parses the checked text (dotted names such as
   ``ParameterStart.A`` are passed to it quoted); if it still fails, each
   attribute is parsed alone to name the one at fault.
3. Each job's attributes are checked and converted into a
   :class:`JobDescription`.

A JDL made only of literals (the common case) skips step 1: a few regexes
that accept only such text find the same attributes and positions
(``_read_plain``); any other text, and any error, takes the way above.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wms.core import classad, parametric, sandboxes
from wms.core import limits as input_limits
from wms.core.classad import IDENT, NAME, NUMBER, OP, PUNCT, STRING, Expression, Token
from wms.core.errors import InvalidInput, JDLError

__all__ = ["JobDescription", "parse_jdl", "parse_one"]

Scalar = str | int | float | bool

#: The most retries a JDL may ask for (MaxRetries); max_reschedule (wms.yaml) may allow fewer.
MAX_RETRIES = 10


@dataclass(frozen=True)
class JobDescription:
    """One job, as its JDL describes it.

    ``attributes`` holds every top-level attribute (original casing, plain
    Python values); the typed fields are the ones the system acts on.
    ``text`` is this one job's JDL, which :func:`parse_one` reads back.
    """

    attributes: dict[str, Any]
    text: str
    executable: str
    arguments: str | None = None
    job_name: str | None = None
    owner: str | None = None
    owner_group: str | None = None
    sites: list[str] = field(default_factory=list)
    banned_sites: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)
    cpu_time: int | None = None
    tags: list[str] = field(default_factory=list)
    priority: int = 0
    requirements: dict[str, Any] | None = None
    requirements_expr: str | None = None
    resource_requests: dict[str, Scalar] = field(default_factory=dict)
    soft_resource_requests: dict[str, Scalar] = field(default_factory=dict)
    number_of_processors: int = 1
    parallel_environment: str | None = None
    project: str | None = None
    reservation: int | None = None
    input_sandbox: list[str] = field(default_factory=list)
    output_sandbox: list[str] = field(default_factory=list)
    input_data: list[str] = field(default_factory=list)
    # DIRAC's StdOutput/StdError: the files of the job's directory its
    # streams go to (None: std.out and std.err), which OutputSandbox may name.
    std_output: str | None = None
    std_error: str | None = None
    # DIRAC's ExecutionEnvironment: variables set for the payload.
    environment: dict[str, str] = field(default_factory=dict)
    # MaxRetries/RetryOnExitCodes: how often a job that fails is run again,
    # and on which exit codes (empty: any non-zero one); see retry_reason.
    max_retries: int = 0
    retry_on_exit_codes: list[int] = field(default_factory=list)

    def get(self, name: str, default: Any = None) -> Any:
        """The attribute *name* (case-insensitive), or *default*."""
        lowered = name.lower()
        for key, value in self.attributes.items():
            if key.lower() == lowered:
                return value
        return default


# --------------------------------------------------------------------------
# Step 1: structure check
# --------------------------------------------------------------------------


@dataclass(slots=True)
class _Attr:
    name: str
    token: Token  # the first token of the name
    value_start: int  # token indexes of the value: [value_start, value_end)
    value_end: int
    # the attributes of the value when it is one record literal ([ ... ])
    record: list[_Attr] | None = None


def _is(tok: Token, text: str) -> bool:
    return tok.kind == PUNCT and tok.text == text


_OPERATOR_WORDS = frozenset({"is", "isnt"})
_OPENERS = {"(": ")", "{": "}", "[": "]"}


def _ends_value(tok: Token | None) -> bool:
    if tok is None:
        return False
    if tok.kind == IDENT:
        return tok.text.lower() not in _OPERATOR_WORDS
    return tok.kind in (STRING, NAME, NUMBER) or (tok.kind == PUNCT and tok.text in ")]}")


def _starts_value(tok: Token) -> bool:
    if tok.kind == IDENT:
        return tok.text.lower() not in _OPERATOR_WORDS
    return tok.kind in (STRING, NAME, NUMBER) or (tok.kind == PUNCT and tok.text in "({[")


def _show(tok: Token) -> str:
    return tok.text if len(tok.text) <= 40 else tok.text[:37] + "..."


class _Checker:
    """Walks the tokens once, checking the structure of records and values."""

    def __init__(self, tokens: list[Token], source: str) -> None:
        self.tokens = tokens
        self.source = source
        # dotted attribute names (ParameterStart.A): first token -> (end, name)
        self.dotted: dict[int, tuple[int, str]] = {}
        # nested records: index of the '[' -> (their attributes, index after the ']')
        self.records: dict[int, tuple[list[_Attr], int]] = {}

    def where(self, tok: Token) -> str:
        return f"{self.source}:{tok.line}:{tok.col}"

    def error(self, message: str, tok: Token) -> JDLError:
        return JDLError(message, where=self.where(tok))

    def at(self, i: int) -> Token | None:
        return self.tokens[i] if i < len(self.tokens) else None

    # -- records -------------------------------------------------------------

    def record_body(self, i: int, opener: Token | None) -> tuple[list[_Attr], int]:
        """Attributes from tokens[i] up to the ``]`` closing *opener* (or the
        end of the text when *opener* is None); returns them and the index
        after the ``]``."""
        attrs: list[_Attr] = []
        seen: dict[str, Token] = {}
        while True:
            while (tok := self.at(i)) is not None and _is(tok, ";"):
                i += 1
            if tok is None:
                if opener is not None:
                    raise self.error("'[' is not closed", opener)
                return attrs, i
            if _is(tok, "]"):
                if opener is None:
                    raise self.error("unexpected ']' (no '[' to close)", tok)
                return attrs, i + 1
            name, i = self.attribute_name(i)
            equals = self.at(i)
            if equals is None or not _is(equals, "="):
                got = f"got {_show(equals)!r}" if equals is not None else "the text ends"
                raise self.error(f"{name}: attribute without '=' (expected '=' after the name, {got})", tok)
            key = name.lower()
            if key in seen:
                first = seen[key]
                raise self.error(
                    f"duplicate attribute {name} (already set at {first.line}:{first.col}; "
                    "attribute names ignore case)",
                    tok,
                )
            seen[key] = tok
            end = self.value(i + 1)
            if end == i + 1:
                raise self.error(f"{name}: missing value after '='", equals)
            nested = self.records.get(i + 1)  # the value starts with a record...
            record = nested[0] if nested is not None and nested[1] == end else None  # ...and is only that
            attrs.append(_Attr(name, tok, i + 1, end, record))
            i = end

    def attribute_name(self, i: int) -> tuple[str, int]:
        tok = self.tokens[i]
        if tok.kind == NAME:
            return re.sub(r"\\(.)", r"\1", tok.text[1:-1]), i + 1
        if tok.kind != IDENT:
            raise self.error(f"expected an attribute name, got {_show(tok)!r}", tok)
        parts, j = [tok.text], i + 1
        while (
            (dot := self.at(j)) is not None
            and dot.kind == OP
            and dot.text == "."
            and (part := self.at(j + 1)) is not None
            and part.kind == IDENT
        ):
            parts.append(part.text)
            j += 2
        if len(parts) > 1:
            self.dotted[i] = (j, ".".join(parts))
        return ".".join(parts), j

    # -- values --------------------------------------------------------------

    # value() and group() run for every token of every JDL, so the checks of
    # _ends_value/_starts_value/step are written out inline: ``ends`` says
    # whether ``prev`` ends a value, and check_adjacent is called only when
    # two values meet (it then allows x[0] and f(x), else raises).

    def value(self, i: int) -> int:
        """Skim one attribute value; returns the index of the ``;``/``]`` that
        ends it, or the end of the tokens."""
        tokens, n = self.tokens, len(self.tokens)
        prev: Token | None = None
        ends = False
        while i < n:
            tok = tokens[i]
            kind, text = tok.kind, tok.text
            if kind == PUNCT:
                if text == ";" or text == "]":
                    return i
                if text == ",":
                    raise self.error(
                        "unexpected ',' (attributes are separated by ';', list items go inside { })", tok
                    )
                if text == ")" or text == "}":
                    raise self.error(f"unexpected {text!r} (nothing to close)", tok)
                if text == "=":
                    self.stray_equals(prev, tok)
                # an opener: ( { [ all start a value
                if ends:
                    self.check_adjacent(prev, tok, in_list=False, record_level=True, i=i)
                i = self.bracketed(i, tok, ends)
                prev, ends = tokens[i - 1], True
                continue
            starts = kind != OP and (kind != IDENT or text.lower() not in _OPERATOR_WORDS)
            if ends and starts:
                self.check_adjacent(prev, tok, in_list=False, record_level=True, i=i)
            prev, ends = tok, starts  # for these kinds, starting a value = ending one
            i += 1
        return i

    def group(self, i: int, opener: Token, *, in_list: bool) -> int:
        """Skim the inside of ``( )``, ``{ }`` or a subscript ``[ ]`` whose
        opener is tokens[i - 1]; returns the index after the closer."""
        closer = _OPENERS[opener.text]
        tokens, n = self.tokens, len(self.tokens)
        prev: Token | None = None
        ends = False
        while True:
            if i >= n:
                raise self.error(f"{opener.text!r} is not closed", opener)
            tok = tokens[i]
            kind, text = tok.kind, tok.text
            if kind == PUNCT:
                if text == closer:
                    if prev is not None and _is(prev, ","):
                        raise self.error(f"expected a value after ',', got {closer!r}", tok)
                    return i + 1
                if text in ")]}":
                    raise self.error(
                        f"mismatched {text!r}: expected {closer!r} to close {opener.text!r} "
                        f"opened at {opener.line}:{opener.col}",
                        tok,
                    )
                if text == ";":
                    raise self.error(
                        f"unexpected ';' inside {opener.text!r} opened at {opener.line}:{opener.col} "
                        f"(is a {closer!r} missing?)",
                        tok,
                    )
                if text == ",":
                    if prev is None or _is(prev, ","):
                        raise self.error("expected a value before ','", tok)
                    prev, ends = tok, False
                    i += 1
                    continue
                if text == "=":
                    self.stray_equals(prev, tok)
                # an opener: ( { [ all start a value
                if ends:
                    self.check_adjacent(prev, tok, in_list=in_list, record_level=False, i=i)
                i = self.bracketed(i, tok, ends)
                prev, ends = tokens[i - 1], True
                continue
            starts = kind != OP and (kind != IDENT or text.lower() not in _OPERATOR_WORDS)
            if ends and starts:
                self.check_adjacent(prev, tok, in_list=in_list, record_level=False, i=i)
            prev, ends = tok, starts
            i += 1

    def bracketed(self, i: int, tok: Token, after_value: bool) -> int:
        """Consume the group opened by tokens[i] (*tok*: ``(``, ``{`` or
        ``[``); returns the index after its closer."""
        if tok.text == "[" and not after_value:  # a nested record
            attrs, j = self.record_body(i + 1, tok)
            self.records[i] = (attrs, j)
            return j
        # ( ), { }, or a subscript x[...]
        return self.group(i + 1, tok, in_list=tok.text == "{")

    def stray_equals(self, prev: Token | None, tok: Token) -> None:
        raise self.error("unexpected '=' (to compare values write '==')", tok)

    def check_adjacent(self, prev: Token | None, tok: Token, *, in_list: bool, record_level: bool, i: int) -> None:
        """Two values side by side with nothing between them."""
        if not (_ends_value(prev) and _starts_value(tok)):
            return
        assert prev is not None
        if tok.kind == PUNCT and tok.text == "[":
            return  # subscript: x[0]
        if tok.kind == PUNCT and tok.text == "(" and prev.kind == IDENT:
            return  # function call: f(x)
        if in_list:
            raise self.error(
                f"list items must be separated by commas (missing ',' before {_show(tok)!r})", tok
            )
        nxt = self.at(i + 1)
        if record_level and tok.kind in (IDENT, NAME) and nxt is not None and _is(nxt, "="):
            raise self.error(f"missing ';' before attribute {tok.text}", tok)
        if prev.kind == STRING and tok.kind == STRING:
            raise self.error(
                "two strings side by side: join them into one string or put an operator between them", tok
            )
        raise self.error(f"expected an operator or ';' before {_show(tok)!r}", tok)

    # -- whole text ----------------------------------------------------------

    def normalized(self, start: int, end: int) -> list[Token]:
        """tokens[start:end] with each dotted attribute name as one quoted name."""
        if not self.dotted:
            return self.tokens[start:end]
        out: list[Token] = []
        i = start
        while i < end:
            if i in self.dotted:
                j, name = self.dotted[i]
                first, last = self.tokens[i], self.tokens[j - 1]
                out.append(Token(NAME, classad.render_name(name), first.line, first.col, first.start, last.end))
                i = j
            else:
                out.append(self.tokens[i])
                i += 1
        return out


# What would make classad.tokens_to_text write more than other blanks: a
# comment (dropped) or a number ending in '.' (written as 1.0). Searched in
# the whole text, strings too: a match there only costs the slower way.
_REWRITTEN_RE = re.compile(r"//|/\*|#|[0-9]\.(?![0-9])")


def _order(attrs: list[_Attr]) -> classad.RecordOrder:
    """The source order of a record's keys, as classad.parse_checked_record
    takes it (what classad._record_orders finds, known here already)."""
    return {
        attr.name.lower(): (n, _order(attr.record) if attr.record is not None else None)
        for n, attr in enumerate(attrs)
    }


# --------------------------------------------------------------------------
# Fast path: JDLs of plain literals
# --------------------------------------------------------------------------
#
# Most JDLs are a record of literals: strings, numbers, names, lists of these
# and records of these (the RFC #7 Requirements). For those, a few regexes
# find the attributes without the tokenizer and the checker, which cost most
# of the time of a small JDL. The grammar below accepts only text that the
# tokenizer and the checker would accept with the same attributes, positions
# and key order, and that tokens_to_text would write back changed in blanks
# only (no comments, no dotted names, no "1."), so the text goes to classad2
# as it is. Anything else -- including a duplicate name, an empty JDL, or
# text that classad2 refuses -- returns None and takes the general way,
# which reports the errors.

_BLANKS = r"[ \t\r\f\v\n]*+"  # as the tokenizer's: no comments
_PLAIN_NAME = r"[A-Za-z_][A-Za-z0-9_]*+"
_STRING = r'"[^"\\\n]*+(?:\\[^\n][^"\\\n]*+)*+"'  # as the tokenizer's
# A number is followed (see below) by a blank or one of , ; ] }, so it is the
# token the tokenizer would read, and never a malformed one.
# (no whole number with a leading 0, which classad2 reads as octal or not at all)
_SCALAR = rf"(?:{_STRING}|-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+|{_PLAIN_NAME})"
_LIST = rf"\{{{_BLANKS}(?:{_SCALAR}{_BLANKS}(?:,{_BLANKS}{_SCALAR}{_BLANKS})*+)?+\}}"
# name = value, then ';' or (for the last one) the closing ']'
_ITEM_END = rf"{_BLANKS}(?:;{_BLANKS}|(?=\]))"
_FLAT_VALUE = rf"(?:{_SCALAR}|{_LIST})"
_FLAT_RECORD = rf"\[{_BLANKS}(?:{_PLAIN_NAME}{_BLANKS}={_BLANKS}{_FLAT_VALUE}{_ITEM_END})*+\]"
_FLAT_ITEM_RE = re.compile(rf"({_PLAIN_NAME}){_BLANKS}={_BLANKS}{_FLAT_VALUE}{_ITEM_END}")
_ITEM_RE = re.compile(rf"({_PLAIN_NAME}){_BLANKS}={_BLANKS}((?:{_FLAT_VALUE}|{_FLAT_RECORD})){_ITEM_END}")
_OPEN_RE = re.compile(rf"{_BLANKS}\[{_BLANKS}")
_CLOSE_RE = re.compile(rf"\]{_BLANKS}")


def _flat_record_order(text: str, pos: int) -> classad.RecordOrder | None:
    """The key order of the record (of plain literals) whose contents start
    at text[pos], or None when a name repeats."""
    order: classad.RecordOrder = {}
    while text[pos] != "]":
        match = _FLAT_ITEM_RE.match(text, pos)
        assert match is not None  # _ITEM_RE has matched the whole record
        key = match[1].lower()
        if key in order:
            return None  # the checker reports it
        order[key] = (len(order), None)
        pos = match.end()
    return order


def _read_plain(text: str) -> tuple[dict[str, Any], dict[str, Token]] | None:
    """What _read returns, for a JDL of plain literals; None for any other."""
    match = _OPEN_RE.match(text)
    if match is None:
        return None
    pos = match.end()
    order: classad.RecordOrder = {}
    positions: dict[str, Token] = {}
    line, line_start = 1, 0
    while text[pos : pos + 1] != "]":
        match = _ITEM_RE.match(text, pos)
        if match is None:
            return None
        name, value = match[1], match[2]
        key = name.lower()
        if key in order:
            return None
        sub = None
        if value[0] == "[":
            opened = _OPEN_RE.match(text, match.start(2))
            assert opened is not None  # the value is a record
            sub = _flat_record_order(text, opened.end())
            if sub is None:
                return None
        order[key] = (len(order), sub)
        start = match.start()
        newlines = text.count("\n", line_start, start)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", line_start, start) + 1
        positions[key] = Token(IDENT, name, line, start - line_start + 1, start, start + len(name))
        pos = match.end()
    if not order or _CLOSE_RE.fullmatch(text, pos) is None:
        return None
    try:
        return classad.parse_checked_record(text, order), positions
    except classad.ClassAdSyntaxError:
        return None  # the general way finds the attribute at fault


def _placed(exc: classad.ClassAdSyntaxError, source: str) -> JDLError:
    """The JDL error of a ClassAd one, at its place in *source*."""
    return JDLError(exc.message, where=f"{source}:{exc.line}:{exc.col}")


def _read(text: str, source: str, shape_known: bool = False) -> tuple[dict[str, Any], dict[str, Token]]:
    """The top-level attributes of a JDL and where each one's name starts;
    *shape_known*: the text has been read before (a stored JDL), so the
    operand check need not run again."""
    plain = _read_plain(text)
    if plain is not None:
        return plain
    try:
        tokens = classad.tokenize(text, hash_comments=True)
    except classad.ClassAdSyntaxError as exc:
        raise _placed(exc, source) from None
    if not tokens:
        raise JDLError("empty JDL: no attributes", where=source)
    checker = _Checker(tokens, source)
    bracketed = _is(tokens[0], "[")
    if bracketed:
        attrs, end = checker.record_body(1, tokens[0])
        if end < len(tokens):
            raise checker.error(f"unexpected text after the closing ']': {_show(tokens[end])!r}", tokens[end])
    else:  # DIRAC's client accepts the attributes without the outer brackets
        attrs, end = checker.record_body(0, None)
    if not attrs:
        raise JDLError("empty JDL: no attributes", where=checker.where(tokens[0]))
    positions = {attr.name.lower(): attr.token for attr in attrs}
    shown = checker.normalized(0, end)
    if not shape_known:
        # what the checker leaves to classad2 (1 +, x ? 1, ...), found before classad2 fails on it
        record = shown if bracketed else [Token(PUNCT, "[", 1, 1, 0, 0), *shown, Token(PUNCT, "]", 1, 1, 0, 0)]
        try:
            classad.check_operands(record)
            classad.check_patterns(shown)
        except classad.ClassAdSyntaxError as exc:
            raise _placed(exc, source) from None
    if not checker.dotted and _REWRITTEN_RE.search(text) is None:
        # tokens_to_text would only turn each run of blanks into one space;
        # classad2 reads any blanks alike, so the text can go as it is.
        ad_text = text
    else:
        ad_text = classad.tokens_to_text(shown)
    if not bracketed:
        ad_text = "[\n" + ad_text + "\n]"
    try:
        # The checker has read the text (balanced, one record, the keys in
        # order): classad need not tokenize it again.
        return classad.parse_checked_record(ad_text, _order(attrs)), positions
    except classad.ClassAdSyntaxError:
        pass
    for attr in attrs:  # find the attribute classad2 cannot read
        value_text = classad.tokens_to_text(checker.normalized(attr.value_start, attr.value_end))
        try:
            classad.parse_record(f"[ {classad.render_name(attr.name)} = {value_text}\n]")
        except classad.ClassAdValueError as exc:    # read, but classad2 raised on the value
            raise checker.error(f"cannot parse the value of {attr.name}: the ClassAd library failed: {exc.why}",
                                attr.token) from None
        except classad.ClassAdSyntaxError:
            raise checker.error(f"cannot parse the value of {attr.name}", attr.token) from None
    raise checker.error("cannot parse the JDL", tokens[0])


# --------------------------------------------------------------------------
# Step 3: typed fields
# --------------------------------------------------------------------------

_INT_TEXT_RE = re.compile(r"[+-]?[0-9]+")


def _shown(value: Any) -> str:
    """A value in an error message, cut to a readable length."""
    text = classad.render_value(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Fields:
    """Typed access to one job's attributes, failing with their position."""

    def __init__(self, attributes: Mapping[str, Any], locate: Callable[[str], str]) -> None:
        self.attributes = attributes
        self.keys = {key.lower(): key for key in attributes}
        self.locate = locate

    def fail(self, key: str, message: str) -> JDLError:
        return JDLError(f"{key}: {message}", where=self.locate(key))

    def raw(self, name: str) -> tuple[str, Any] | None:
        """(name as written, value) or None when absent or UNDEFINED."""
        key = self.keys.get(name.lower())
        if key is None or self.attributes[key] is None:
            return None
        return key, self.attributes[key]

    def string(self, name: str) -> str | None:
        found = self.raw(name)
        if found is None:
            return None
        key, value = found
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise self.fail(key, f"expected a string, got {_shown(value)}")

    def file_name(self, name: str) -> str | None:
        """A string naming a file of the job's directory (core/sandboxes.py's rule)."""
        value = self.string(name)
        if value is None:
            return None
        try:
            return sandboxes.check_name(value, "a file of the job's directory")
        except InvalidInput as exc:
            raise self.fail(self.keys[name.lower()], exc.message) from None

    def strings(self, *names: str) -> list[str]:
        """A string or a list of strings, from any of *names*, merged."""
        result: list[str] = []
        for name in names:
            found = self.raw(name)
            if found is None:
                continue
            key, value = found
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
                raise self.fail(key, f"expected a string or a list of strings, got {_shown(value)}")
            result.extend(item for item in items if item and item not in result)
        return result

    def integer(self, name: str, *, minimum: int | None, what: str) -> int | None:
        found = self.raw(name)
        if found is None:
            return None
        key, value = found
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str) and len(value) <= 24 and _INT_TEXT_RE.fullmatch(value.strip()):
            number = int(value.strip())
        if number is None or (minimum is not None and number < minimum):
            raise self.fail(key, f"expected {what}, got {_shown(value)}")
        if not -input_limits.INT32_MAX - 1 <= number <= input_limits.INT32_MAX:
            raise self.fail(key, f"expected {what} of at most {input_limits.INT32_MAX}, got {_shown(value)}")
        return number

    def exit_codes(self, name: str) -> list[int]:
        """An exit code or a list of them, each 1 to 255 (0 is success, never retried)."""
        found = self.raw(name)
        if found is None:
            return []
        key, value = found
        items = value if isinstance(value, list) else [value]
        codes: list[int] = []
        for item in items:
            if (isinstance(item, bool) or not isinstance(item, int | float) or int(item) != item
                    or not 1 <= item <= 255):
                raise self.fail(key, f"expected exit codes from 1 to 255 (one or a list such as {{3, 75}}), "
                                     f"got {_shown(item)}")
            if int(item) not in codes:
                codes.append(int(item))
        return codes

    def requests(self, name: str) -> dict[str, Scalar]:
        found = self.raw(name)
        if found is None:
            return {}
        key, value = found
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a record [ name = value; ... ], got {_shown(value)}")
        for item, request in value.items():
            if not isinstance(request, (str, int, float)):  # bool is an int
                raise self.fail(
                    key, f"{item}: expected a string, a number or a boolean, got {_shown(request)}"
                )
        return dict(value)

    def requirements(self) -> tuple[dict[str, Any] | None, str | None]:
        found = self.raw("Requirements")
        if found is None:
            return None, None
        key, value = found
        if isinstance(value, dict):
            return value, None  # the RFC #7 section (SPEC 002)
        if isinstance(value, Expression):
            return None, value.text  # a ClassAd expression (SPEC 004)
        if isinstance(value, bool):
            return None, "true" if value else "false"
        raise self.fail(
            key,
            "expected a record [ name = value; ... ] (RFC #7) or a ClassAd expression, "
            f"got {_shown(value)}",
        )

    def retries(self, name: str) -> int:
        """MaxRetries: 0 to MAX_RETRIES (a job failing for good is not run again without end)."""
        count = self.integer(name, minimum=0, what="an integer from 0 to " + str(MAX_RETRIES))
        if count is not None and count > MAX_RETRIES:
            raise self.fail(self.keys[name.lower()], f"at most {MAX_RETRIES} retries, got {count}")
        return count or 0

    def boolean(self, name: str) -> bool | None:
        """``true``/``false``, or DIRAC's spellings of them as strings (``"yes"``, ``"True"``, ...)."""
        found = self.raw(name)
        if found is None:
            return None
        key, value = found
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS:
            return _BOOLEAN_WORDS[value.strip().lower()]
        raise self.fail(key, f"expected true or false, got {_shown(value)}")

    def environment(self, name: str) -> dict[str, str]:
        """DIRAC's ExecutionEnvironment: ``"NAME=value"`` strings, one or a list."""
        out: dict[str, str] = {}
        for item in self.strings(name):
            variable, equals, value = item.partition("=")
            if not equals or not _ENV_NAME_RE.fullmatch(variable):
                raise self.fail(self.keys[name.lower()], f"expected NAME=value, got {_shown(item)}")
            if variable.upper().startswith(RESERVED_ENV_PREFIX):
                raise self.fail(self.keys[name.lower()],
                                f"{variable}: names beginning {RESERVED_ENV_PREFIX} are set by the system")
            out[variable] = value
        return out

    def processors(self, exact: int | None) -> int:
        """The job's slot count from NumberOfProcessors and DIRAC's
        MinNumberOfProcessors/MaxNumberOfProcessors (see DIRAC_ATTRIBUTES)."""
        low = self.integer("MinNumberOfProcessors", minimum=1, what="a positive integer")
        high = self.integer("MaxNumberOfProcessors", minimum=1, what="a positive integer")
        if low is not None and high is not None and low > high:
            raise self.fail(self.keys["minnumberofprocessors"],
                            f"{low} is more than MaxNumberOfProcessors ({high})")
        if exact is not None:
            if low is not None and exact < low:
                raise self.fail(self.keys["numberofprocessors"],
                                f"{exact} is less than {self.keys['minnumberofprocessors']} ({low})")
            if high is not None and exact > high:
                raise self.fail(self.keys["numberofprocessors"],
                                f"{exact} is more than {self.keys['maxnumberofprocessors']} ({high})")
            return exact
        return low if low is not None else 1

    def input_data(self) -> list[str]:
        """InputData as LFNs: a leading ``/`` gets ``LFN:``; ``//`` is refused."""
        result = []
        for item in self.strings("InputData"):
            lfn = item.strip()
            if lfn.startswith("/"):
                lfn = "LFN:" + lfn
            elif lfn[:4].lower() == "lfn:":
                lfn = "LFN:" + lfn[4:]
            if lfn.startswith("LFN:") and "//" in lfn:
                key = self.keys["inputdata"]
                raise self.fail(key, f"'//' is not allowed inside an LFN, got {_shown(item)}")
            result.append(lfn)
        return result


_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Variables a payload gets from the system (WMS_JOB_ID, WMS_JOB_TOKEN, ...): never from its JDL.
RESERVED_ENV_PREFIX = "WMS_"
WHOLE_NODE_TAG = "WholeNode"
_BOOLEAN_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}

#: DIRAC's job description attributes (its JobDescription and JDL
#: documentation) that this system deliberately does not honour, with why:
#: a JDL naming one is refused, naming it, rather than run without what
#: its author meant. docs/jdl.md lists every DIRAC attribute and what it
#: does here.
UNSUPPORTED = {
    "outputdata": "there are no storage elements or file catalogue here: name the files in OutputSandbox "
                  "and fetch them with `wms output ID --dir D`",
    "outputse": "there are no storage elements here: name the files in OutputSandbox",
    "outputpath": "there are no storage elements here: name the files in OutputSandbox",
    "inputdatapolicy": "there are no storage elements here: InputData is recorded, never downloaded",
    "inputdatamodule": "there are no storage elements here: InputData is recorded, never downloaded",
    "gridce": "a job goes to a Site/CE/Queue through its Site and Requirements, not to a grid CE",
    "submitpools": "the SubmitPool is computed from the Requirements (specs/002), not chosen",
}


# The fields read after Executable, Requirements, NumberOfProcessors and
# Priority, in the order they are checked (of two wrong attributes, the first
# here is reported): (field, its attribute names in lower case, how to read
# it). A field whose attributes are all absent keeps its default, which is
# what reading it would give; skipping those keeps _describe cheap.
_OPTIONAL_FIELDS: tuple[tuple[str, tuple[str, ...], Callable[[_Fields], Any]], ...] = (
    ("arguments", ("arguments",), lambda f: f.string("Arguments")),
    ("job_name", ("jobname",), lambda f: f.string("JobName")),
    ("owner", ("owner",), lambda f: f.string("Owner")),
    ("owner_group", ("ownergroup",), lambda f: f.string("OwnerGroup")),
    ("sites", ("site",), lambda f: f.strings("Site")),
    ("banned_sites", ("bannedsite", "bannedsites"), lambda f: f.strings("BannedSite", "BannedSites")),
    ("platforms", ("platform",), lambda f: f.strings("Platform")),
    ("cpu_time", ("cputime",), lambda f: f.integer("CPUTime", minimum=1, what="a positive integer")),
    ("tags", ("tags", "tag"), lambda f: f.strings("Tags", "Tag")),
    ("resource_requests", ("resourcerequests",), lambda f: f.requests("ResourceRequests")),
    ("soft_resource_requests", ("softresourcerequests",), lambda f: f.requests("SoftResourceRequests")),
    ("parallel_environment", ("parallelenvironment",), lambda f: f.string("ParallelEnvironment")),
    ("project", ("project",), lambda f: f.string("Project")),
    (
        "reservation",
        ("reservation",),
        lambda f: f.integer("Reservation", minimum=1, what="a positive integer (an advance reservation id)"),
    ),
    ("input_sandbox", ("inputsandbox",), lambda f: f.strings("InputSandbox")),
    ("output_sandbox", ("outputsandbox",), lambda f: f.strings("OutputSandbox")),
    ("input_data", ("inputdata",), lambda f: f.input_data()),
    ("std_output", ("stdoutput",), lambda f: f.file_name("StdOutput")),
    ("std_error", ("stderror",), lambda f: f.file_name("StdError")),
    ("environment", ("executionenvironment",), lambda f: f.environment("ExecutionEnvironment")),
    ("max_retries", ("maxretries",), lambda f: f.retries("MaxRetries")),
    ("retry_on_exit_codes", ("retryonexitcodes",), lambda f: f.exit_codes("RetryOnExitCodes")),
)

# lowercase attribute name -> index of its field in _OPTIONAL_FIELDS
_OPTIONAL_INDEX = {name: n for n, (_, names, _) in enumerate(_OPTIONAL_FIELDS) for name in names}


def _describe(attributes: dict[str, Any], locate: Callable[[str], str], source: str) -> JobDescription:
    fields = _Fields(attributes, locate)
    executable = fields.string("Executable")
    if executable is None:
        raise JDLError("Executable is required: the JDL has no Executable attribute", where=source)
    if not executable.strip():
        raise JDLError("Executable must not be empty", where=locate(fields.keys["executable"]))
    for key in sorted(UNSUPPORTED.keys() & fields.keys.keys()):
        raise fields.fail(fields.keys[key], f"not supported: {UNSUPPORTED[key]}")
    requirements, requirements_expr = fields.requirements()
    processors = fields.integer("NumberOfProcessors", minimum=1, what="a positive integer")
    if "minnumberofprocessors" in fields.keys or "maxnumberofprocessors" in fields.keys:
        processors = fields.processors(processors)
    priority = fields.integer("Priority", minimum=None, what="an integer")
    text = classad.render_record(attributes)
    # the optional fields this JDL sets, in _OPTIONAL_FIELDS order
    wanted = sorted({_OPTIONAL_INDEX[key] for key in fields.keys if key in _OPTIONAL_INDEX})
    optional = {_OPTIONAL_FIELDS[n][0]: _OPTIONAL_FIELDS[n][2](fields) for n in wanted}
    if optional.get("retry_on_exit_codes") and not optional.get("max_retries"):
        raise fields.fail(fields.keys["retryonexitcodes"], "names exit codes to retry on, but MaxRetries is not "
                          "set: add MaxRetries = N (how many times to run the job again)")
    if "wholenode" in fields.keys and fields.boolean("WholeNode"):
        # DIRAC's meaning: the job wants a whole node, which queues say with the WholeNode tag.
        tags = optional.get("tags") or []
        optional["tags"] = tags if WHOLE_NODE_TAG in tags else [*tags, WHOLE_NODE_TAG]
    return JobDescription(
        attributes=attributes,
        text=text,
        executable=executable,
        priority=priority if priority is not None else 0,
        requirements=requirements,
        requirements_expr=requirements_expr,
        number_of_processors=processors if processors is not None else 1,
        **optional,
    )


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


_MERGED_OVERRIDES = frozenset({"resourcerequests", "softresourcerequests"})


def _apply_overrides(attributes: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """*attributes* with *overrides* set (names ignore case; a JDL attribute
    keeps its place and casing). ``ResourceRequests`` and
    ``SoftResourceRequests`` records are merged request by request."""
    result = dict(attributes)
    folded = {key.lower(): key for key in result}
    for name, value in overrides.items():
        key = folded.get(name.lower())
        if key is None:
            result[name] = value
            folded[name.lower()] = name
        elif name.lower() in _MERGED_OVERRIDES and isinstance(result[key], dict) and isinstance(value, Mapping):
            result[key] = {**result[key], **value}
        else:
            result[key] = value
    return result


def parse_jdl(
    text: str,
    source: str = "<jdl>",
    *,
    overrides: Mapping[str, Any] | None = None,
    limits: input_limits.Limits = input_limits.DEFAULT,
    max_jobs: int = parametric.MAX_JOBS,
) -> list[JobDescription]:
    """Parse a JDL into its jobs: several for a parametric JDL, else one.

    *source* names the text in error messages (``hello.jdl:4:12: ...``).
    *overrides* are attributes set from outside the text (``wms submit -l``,
    ``-P``, ...): they replace the JDL's own, except that resource requests
    are merged; errors about them carry *source* without a position.
    *limits* bound the text before anything parses it
    (:func:`wms.core.limits.scan_classad`); a parametric JDL may describe at
    most *max_jobs* jobs. Raises :class:`JDLError` (:class:`TooLarge` for
    a text over ``limits.jdl_bytes``).
    """
    input_limits.scan_classad(text, source, limits)
    # a stored JDL (STORED) was read whole when it was submitted: classad2 cannot fail on it
    attributes, positions = _read(text, source, shape_known=limits is input_limits.STORED)
    if overrides:
        attributes = _apply_overrides(attributes, overrides)
        for name in overrides:
            positions.pop(name.lower(), None)

    def locate(name: str) -> str:
        tok = positions.get(name.lower())
        return f"{source}:{tok.line}:{tok.col}" if tok is not None else source

    jobs = parametric.expand(attributes, locate=locate, max_jobs=max_jobs)
    return [_describe(job, locate, source) for job in jobs]


def parse_one(text: str, source: str = "<jdl>", *, limits: input_limits.Limits = input_limits.DEFAULT) -> JobDescription:
    """Parse a JDL that describes exactly one job (e.g. a job's own ``text``)."""
    jobs = parse_jdl(text, source, limits=limits)
    if len(jobs) != 1:
        raise JDLError(
            f"expected one job, but the JDL is parametric and describes {len(jobs)} jobs", where=source
        )
    return jobs[0]
