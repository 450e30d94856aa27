"""Input limits: one place for every bound on what a caller may send.

Everything a user, a pilot or an administrator sends is measured here
before any expensive work (a JSON parse, our JDL checker, the native
ClassAd library) sees it:

* :func:`check_text` refuses characters no stored text may hold (NUL, which
  PostgreSQL cannot store and C code reads as the end of the string, and
  lone UTF-16 surrogates, which cannot be written as UTF-8), naming the line
  and column;
* :func:`scan_classad` is a cheap pre-scan of ClassAd/JDL text with its own
  tokenizer: size, nesting depth of records, lists and parentheses, and the
  operators of one expression. classad2 is native code that recurses on
  nesting and on operator chains; past a few hundred levels it fails to
  evaluate and further on it exhausts the C stack and the process dies, so
  :data:`CEILING` bounds what may reach it whatever the configuration says.

The values come from ``limits:`` in wms.yaml (docs/configuration.md);
:class:`Limits` holds them for the pure code that enforces them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wms.core.errors import InvalidInput, JDLError, TooLarge

__all__ = [
    "APPLICATION_HISTORY_MAX",
    "APPLICATION_STATUS_MAX",
    "APPLICATION_STATUS_PATTERN",
    "CEILING",
    "DEFAULT",
    "INT32_MAX",
    "INT64_MAX",
    "Limits",
    "MATCH_BATCH_MAX",
    "PILOT_REPORTS_MAX",
    "STORED",
    "check_text",
    "decode_utf8",
    "find_bad_character",
    "parse_id",
    "scan_classad",
]


#: The database's integer columns: ids of jobs are 64-bit, every other
#: number stored (ids of advance reservations, priorities, CPU times, slots,
#: exit codes) 32-bit. A larger number is refused before it reaches a query.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: The most jobs one job control (hold, release, ...) changes in one call: the
#: ids it names, or the jobs its filter selects a batch at a time (the
#: answer says where the next batch starts).
CONTROL_JOBS_MAX = 5_000
#: The most jobs one batched match request (POST /matcher/request-jobs) may ask for.
MATCH_BATCH_MAX = 64
#: The most job reports one call of a pilot (POST /jobs/pilot-status) may carry:
#: its slots' at a time. Each may hold a job's output, so the body's bound
#: (limits.max_body) is the other limit.
PILOT_REPORTS_MAX = 64
#: A job's application status (POST /jobs/{id}/application-status): one line
#: of at most this many characters, no control character nor line separator.
APPLICATION_STATUS_MAX = 256
APPLICATION_STATUS_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
#: History entries of application statuses kept per attempt of a job; past
#: them only the minor status changes (a payload reporting every event
#: would otherwise grow the history without bound).
APPLICATION_HISTORY_MAX = 50
_DIGITS_RE = re.compile(r"[0-9]{1,19}")


def parse_id(text: str, maximum: int = INT32_MAX) -> int | None:
    """The id written in *text* (ASCII digits only), or None when it is not
    one or is larger than *maximum* (so no stored object has it)."""
    if _DIGITS_RE.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= maximum else None


@dataclass(frozen=True)
class Limits:
    """The bounds on one request (defaults: docs/configuration.md, ``limits``)."""

    #: bytes of one HTTP request body (413 above it)
    request_bytes: int = 8 * 1024 * 1024
    #: bytes of one JDL text (413 above it)
    jdl_bytes: int = 256 * 1024
    #: nesting of records, lists and parentheses, combined
    depth: int = 32
    #: operators along one expression (``a > 1 && b < 2`` has 3)
    expression_terms: int = 256
    #: seconds one database statement may run (0: no limit)
    statement_timeout: float = 30.0
    #: milliseconds of CPU a job's expression may take against one queue
    #: (wms.core.evaluation: at submission and at each match). An ordinary
    #: Requirements expression takes 20-60 microseconds; 5 ms is a hundred
    #: times that, and a quarter of a pilot request's p99 budget (20 ms).
    evaluation_ms: float = 5.0


DEFAULT = Limits()


@dataclass(frozen=True)
class _Ceiling:
    """What classad2 is known to take (measured on classad2 25: nesting past
    about 170 fails to parse, an operator chain past about 420 fails to
    evaluate, and 40,000 exhausts an 8 MB stack)."""

    depth: int = 64
    expression_terms: int = 300


CEILING = _Ceiling()

#: For text the system wrote itself (a stored job's JDL): no size limit,
#: nesting and operators only held to what classad2 takes.
STORED = Limits(jdl_bytes=2**62, depth=CEILING.depth, expression_terms=CEILING.expression_terms)


# --------------------------------------------------------------------------
# Characters
# --------------------------------------------------------------------------

_BAD_CHAR_RE = re.compile("[\x00\ud800-\udfff]")


def find_bad_character(text: str) -> tuple[int, int, str] | None:
    """(line, column, description) of the first NUL or lone surrogate, or None.

    A Python ``str`` holds a surrogate only when it is lone (a pair read from
    UTF-8 or JSON is one character), so any code point in U+D800..U+DFFF is
    refused.
    """
    match = _BAD_CHAR_RE.search(text)
    if match is None:
        return None
    pos = match.start()
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    c = match.group()
    what = "NUL character (U+0000)" if c == "\x00" else f"lone surrogate U+{ord(c):04X} (not valid Unicode text)"
    return line, col, what


def check_text(text: str, where: str, *, error: type[InvalidInput] = InvalidInput) -> None:
    """Refuse *text* holding a NUL or a lone surrogate: ``where:line:col: ...``."""
    found = find_bad_character(text)
    if found is not None:
        line, col, what = found
        raise error(f"{what} is not allowed", where=f"{where}:{line}:{col}")


def decode_utf8(data: bytes, source: str) -> str:
    """*data* read as UTF-8; InvalidInput ``source:line:col: not valid UTF-8
    text (byte 0xED)`` when it is not (surrogates encoded in UTF-8 included)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = exc.start
        line_start = data.rfind(b"\n", 0, start) + 1
        line = data.count(b"\n", 0, start) + 1
        col = len(data[line_start:start].decode("utf-8", "replace")) + 1
        raise InvalidInput(f"not valid UTF-8 text (byte 0x{data[start]:02X})", where=f"{source}:{line}:{col}") from None


# --------------------------------------------------------------------------
# ClassAd pre-scan
# --------------------------------------------------------------------------

# What the pre-scan must see: strings and quoted names (skipped whole, so
# brackets inside them do not count), comments (skipped), brackets,
# separators and operators. Everything else (names, numbers, blanks) is
# passed over by the regex engine without a Python step.
_SCAN_RE = re.compile(
    r"(?=[\"'/#\[\]{}();,&|=!<>+\-*%~^?0-9])"  # lets the regex engine skip other characters fast
    r'(?:"(?:[^"\\\n]|\\[^\n])*+"?'  # a string (an unterminated one ends the scan of it)
    r"|'(?:[^'\\\n]|\\[^\n])*+'?"  # a quoted attribute name
    r"|//[^\n]*+|/\*(?s:.*?)(?:\*/|\Z)"  # comments
    r"|\#[^\n]*+"  # a # comment (JDL files; elsewhere our tokenizer refuses '#')
    r"|(?P<open>[\[{(])|(?P<close>[\]})])|(?P<sep>[;,])"
    r"|(?<![A-Za-z0-9_.])(?P<number>[0-9]{19,})"  # may be past 64 bits (classad2 reads it as 0)
    r"|(?P<op>&&|\|\||=\?=|=!=|==|!=|<=|>=|>>>|<<|>>|[<>+\-*/%!~&|^?]))"
)
_OPERATOR_CHAR_RE = re.compile(r"[&|=!<>+\-*/%~^?]")
_LONG_DIGITS_RE = re.compile(r"[0-9]{19}")


def _position(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def scan_classad(
    text: str,
    source: str,
    limits: Limits = DEFAULT,
    *,
    what: str = "JDL",
    size_limit: int | None = None,
) -> None:
    """Check ClassAd or JDL *text* against *limits* before anything parses it.

    Refuses, with ``source:line:col`` where there is a place to name: a text
    over *size_limit* bytes (``limits.jdl_bytes`` by default; 413), a NUL or a
    lone surrogate, nesting deeper than ``limits.depth``, an expression
    with more than ``limits.expression_terms`` operators along it, and an
    integer past 64 bits (which classad2 would silently read as 0). Nesting
    and operators are also held to :data:`CEILING`. Raises :class:`JDLError` (or
    :class:`TooLarge` for the size). Brackets need not balance: the parser
    that runs next reports that with its own message.
    """
    limit = limits.jdl_bytes if size_limit is None else size_limit
    # a str's UTF-8 size is at least its length and at most four times it
    if len(text) > limit or (len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit):
        raise TooLarge(f"{what} too large: more than {limit} bytes (limits.jdl_bytes)", where=source)
    check_text(text, source, error=JDLError)
    max_depth = min(limits.depth, CEILING.depth)
    max_terms = min(limits.expression_terms, CEILING.expression_terms)
    # Most texts cannot reach either limit even counting the characters in
    # strings and comments: no need to look closer.
    if (
        text.count("[") + text.count("{") + text.count("(") <= max_depth
        and (len(text) <= max_terms or len(_OPERATOR_CHAR_RE.findall(text)) <= max_terms)
        and _LONG_DIGITS_RE.search(text) is None
    ):
        return
    depth = 0
    terms = 0  # operators on the way from the start of this expression
    saved: list[int] = []  # terms when each open bracket was opened
    for match in _SCAN_RE.finditer(text):
        kind = match.lastgroup
        if kind is None:
            continue  # a string, a quoted name or a comment
        if kind == "op":
            terms += 1
            if terms > max_terms:
                line, col = _position(text, match.start())
                raise JDLError(
                    f"expression too long: more than {max_terms} operators in one expression "
                    "(limits.expression_terms)",
                    where=f"{source}:{line}:{col}",
                )
        elif kind == "open":
            depth += 1
            if depth > max_depth:
                line, col = _position(text, match.start())
                raise JDLError(
                    f"nested too deep: more than {max_depth} levels of records, lists and parentheses "
                    "(limits.depth)",
                    where=f"{source}:{line}:{col}",
                )
            saved.append(terms)
        elif kind == "close":
            if saved:
                depth -= 1
                terms = saved.pop()
        elif kind == "sep":
            terms = saved[-1] if saved else 0
        elif kind == "number" and (len(match.group()) > 19 or int(match.group()) > INT64_MAX):
            line, col = _position(text, match.start())
            raise JDLError(f"number too large: more than {INT64_MAX} (64 bits)", where=f"{source}:{line}:{col}")
