"""Which regular expressions the ClassAd pattern functions may run.

classad2 matches the patterns of ``regexp``, ``regexps``, ``regexpMember``,
``stringListRegexpMember``, ``replace`` and ``replaceAll`` with PCRE, a
backtracking engine: a pattern that can match one text in many ways, such
as ``^(a|a)*$`` against ``aaaa...ab``, tries every way before it fails. PCRE
stops each call at its match limit (about 0.1 s here), so one call is
bounded, but an expression repeats calls at will (issue reproduction: a
list of twenty such calls made every pilot request take 2.4 s).

So a pattern is refused before any evaluation when it can backtrack
catastrophically (docs/security.md, "Evaluation cost"). The rule is
conservative, read off the pattern's structure, not off any text:

* no back-reference (``\\1``, ``\\k<name>``, ``(?P=name)``), recursion,
  subroutine call, conditional group, callout or backtracking verb;
* inside any repetition (a maximum above 1) no large repetition
  (``(a*){1,3}``: each pass multiplies the ways to split the text);
* inside a *large* repetition (``*``, ``+``, ``{n,}``, or a maximum above
  :data:`SMALL_REPEAT`) nothing may be repeated or optional again
  (``(a+)+``, ``(a*)*``, ``(ab?)*``), the repeated part must not match the
  empty text (``(a|)*``), and the branches of every alternation in it must
  start with characters no other branch starts with (``(a|ab)*``,
  ``(\\w|\\d)+``); no lookaround either.

With these, each pass of a large repetition is decided by its first
character, and the cost of a match grows with the text at most as a
polynomial whose degree is the number of large repetitions in the
pattern. A small repetition (``{1,3}``, ``?``) may hold alternations and
other small repetitions: what it multiplies is bounded by the pattern's
own length,
which the JDL size limit bounds, and the evaluation budget
(:mod:`wms.core.evaluation`) catches what slips past this check.

Case-insensitive matching is assumed for every pattern (an option may be
computed), so ``(a|A)*`` overlaps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MAX_WAYS", "PatternRefused", "SMALL_REPEAT", "check_pattern"]

#: The largest repetition count (``{n,m}``, m at most this) whose body is not
#: held to the rules of a large repetition.
SMALL_REPEAT = 16
#: The most ways a pattern's choices may combine on one path (``a?`` thirty
#: times is 2**30: each is tried before a match fails).
MAX_WAYS = 10_000
_MAX_CODE = 0x10FFFF


class PatternRefused(ValueError):
    """A pattern that may not be run: ``message`` says why, ``offset`` is the
    0-based index in the pattern of the construct at fault."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


# ----------------------------------------------------------------- character sets
Ranges = tuple[tuple[int, int], ...]
_ANY: Ranges = ((0, _MAX_CODE),)


def _normal(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= _MAX_CODE:
        out.append((start, _MAX_CODE))
    return tuple(out)


def _folded(ranges: Ranges) -> Ranges:
    """The ranges with the other case of every ASCII letter in them."""
    extra = []
    for lo, hi in ranges:
        for a, b, shift in ((65, 90, 32), (97, 122, -32)):
            if lo <= b and hi >= a:
                extra.append((max(lo, a) + shift, min(hi, b) + shift))
    return _normal([*ranges, *extra])


def _overlap(a: Ranges, b: Ranges) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def _chars(text: str) -> Ranges:
    return _normal([(ord(c), ord(c)) for c in text])


_DIGIT = _chars("0123456789")
_WORD = _normal([(48, 57), (65, 90), (95, 95), (97, 122)])
_SPACE = _chars(" \t\n\r\f\v")
_HSPACE = _chars(" \t\xa0")
_VSPACE = _normal([(10, 13), (0x85, 0x85), (0x2028, 0x2029)])
_NEWLINE = _chars("\n")
_CLASS_ESCAPES: dict[str, Ranges] = {
    "d": _DIGIT, "D": _complement(_DIGIT), "w": _WORD, "W": _complement(_WORD),
    "s": _SPACE, "S": _complement(_SPACE), "h": _HSPACE, "H": _complement(_HSPACE),
    "v": _VSPACE, "V": _complement(_VSPACE), "R": _VSPACE, "N": _complement(_NEWLINE),
    "p": _ANY, "P": _ANY, "X": _ANY, "C": _ANY,
}
_CHAR_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "e": "\x1b", "a": "\x07"}
_ZERO_WIDTH_ESCAPES = frozenset("bBAZzGK")


# ----------------------------------------------------------------- the tree
@dataclass
class _Node:
    kind: str                     # char, assert, seq, alt, repeat, look
    at: int                       # offset of the construct in the pattern
    chars: Ranges = ()
    items: list["_Node"] = field(default_factory=list)
    low: int = 0
    high: int | None = None       # None: no maximum


def _nullable(node: _Node) -> bool:
    if node.kind == "char":
        return False
    if node.kind in ("assert", "look"):
        return True
    if node.kind == "seq":
        return all(_nullable(n) for n in node.items)
    if node.kind == "alt":
        return any(_nullable(n) for n in node.items)
    return node.low == 0 or _nullable(node.items[0])


def _first(node: _Node) -> Ranges:
    """The characters a non-empty match of *node* may start with."""
    if node.kind == "char":
        return node.chars
    if node.kind in ("assert", "look"):
        return ()
    if node.kind == "seq":
        out: list[tuple[int, int]] = []
        for item in node.items:
            out.extend(_first(item))
            if not _nullable(item):
                break
        return _normal(out)
    if node.kind == "alt":
        return _normal([r for n in node.items for r in _first(n)])
    return _first(node.items[0])


def _large(node: _Node) -> bool:
    return node.high is None or node.high > SMALL_REPEAT


# ----------------------------------------------------------------- the parser
class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def refuse(self, message: str, at: int | None = None) -> PatternRefused:
        return PatternRefused(message, self.i if at is None else at)

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> _Node:
        node = self.alternation()
        if self.i < len(self.p):       # only a ')' stops an alternation early
            raise self.refuse("unbalanced ')'")
        return node

    def alternation(self) -> _Node:
        start = self.i
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else _Node("alt", start, items=branches)

    def sequence(self) -> _Node:
        start = self.i
        items: list[_Node] = []
        while self.i < len(self.p) and self.peek() not in "|)":
            atom = self.atom()
            if atom is None:
                continue
            items.append(self.quantified(atom))
        return _Node("seq", start, items=items)

    def quantified(self, atom: _Node) -> _Node:
        while True:
            at, c = self.i, self.peek()
            if c in ("*", "+", "?"):
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self.i += 1
            elif c == "{" and (bounds := self.braces()) is not None:
                low, high = bounds
            else:
                return atom
            if atom.kind == "assert":
                raise self.refuse("nothing to repeat before this quantifier", at)
            if self.peek() in ("?", "+"):   # lazy or possessive: the same ways to match
                self.i += 1
            atom = _Node("repeat", at, items=[atom], low=low, high=high)

    def braces(self) -> tuple[int, int | None] | None:
        """``{n}``, ``{n,}``, ``{n,m}``, ``{,m}`` at self.i; None when the brace is a literal."""
        j = self.p.find("}", self.i)
        if j < 0:
            return None
        body = self.p[self.i + 1 : j]
        low_text, comma, high_text = body.partition(",")
        low_text, high_text = low_text.strip(), high_text.strip()
        if not (low_text.isdigit() or (comma and not low_text and high_text.isdigit())):
            return None
        if high_text and not high_text.isdigit():
            return None
        low = int(low_text) if low_text else 0
        high = (int(high_text) if high_text else None) if comma else low
        self.i = j + 1
        return low, high

    def atom(self) -> _Node | None:
        at, c = self.i, self.peek()
        if c == "(":
            return self.group()
        if c == "[":
            return _Node("char", at, chars=_folded(self.char_class()))
        if c == "\\":
            return self.escape(in_class=False)
        if c in "*+?":
            raise self.refuse(f"nothing to repeat before {c!r}")
        self.i += 1
        if c in "^$":
            return _Node("assert", at)
        if c == ".":
            return _Node("char", at, chars=_ANY)
        return _Node("char", at, chars=_folded(_chars(c)))

    def group(self) -> _Node | None:
        at = self.i
        self.i += 1
        kind = "group"
        if self.peek() == "*":
            raise self.refuse("backtracking control verbs (*...) are not allowed", at)
        if self.peek() == "?":
            self.i += 1
            c = self.peek()
            if c == "#":                                   # (?# comment )
                end = self.p.find(")", self.i)
                if end < 0:
                    raise self.refuse("unterminated comment group", at)
                self.i = end + 1
                return None
            if c in ":|>":
                self.i += 1
            elif c in "=!" or (c == "<" and self.peek(1) in "=!"):
                self.i += 1 if c in "=!" else 2
                kind = "look"
            elif c == "<" or c == "'" or (c == "P" and self.peek(1) == "<"):
                self.i += 2 if c == "P" else 1
                end = self.p.find(">" if c != "'" else "'", self.i)
                if end < 0:
                    raise self.refuse("unterminated group name", at)
                self.i = end + 1
            elif c in ("P", "&", "R", "(", "C") or c.isdigit() or (c in "+-" and self.peek(1).isdigit()):
                raise self.refuse("back-references, recursion, subroutine calls, conditional groups and "
                                  "callouts are not allowed in a pattern", at)
            else:                                          # option settings: (?i) (?i-m) (?^) (?i:...)
                while self.peek() and (self.peek().isalpha() or self.peek() in "-^"):
                    self.i += 1
                if self.peek() == ")":
                    self.i += 1
                    return None
                if self.peek() != ":":
                    raise self.refuse("unknown group construct", at)
                self.i += 1
        inner = self.alternation()
        if self.peek() != ")":
            raise self.refuse("'(' is not closed", at)
        self.i += 1
        if kind == "look":
            return _Node("look", at, items=[inner])
        return inner

    def escape(self, *, in_class: bool) -> _Node:
        at = self.i
        self.i += 1
        c = self.peek()
        if not c:
            raise self.refuse("a pattern may not end with '\\'", at)
        self.i += 1
        if c.isdigit() and c != "0" or c in "gk":
            raise self.refuse("back-references are not allowed in a pattern", at)
        if c == "Q":                                       # \Q...\E: literal text
            end = self.p.find("\\E", self.i)
            text = self.p[self.i:] if end < 0 else self.p[self.i:end]
            self.i = len(self.p) if end < 0 else end + 2
            if not text:
                return _Node("assert", at)
            return _Node("seq", at, items=[_Node("char", at + 2 + k, chars=_folded(_chars(ch)))
                                            for k, ch in enumerate(text)])
        if c == "E":
            return _Node("assert", at)
        if c in _ZERO_WIDTH_ESCAPES and not in_class:
            return _Node("assert", at)
        if c in _CLASS_ESCAPES:
            if c in "pP" and self.peek() == "{":
                end = self.p.find("}", self.i)
                self.i = len(self.p) if end < 0 else end + 1
            elif c in "pP":
                self.i += 1
            return _Node("char", at, chars=_CLASS_ESCAPES[c])
        if c in "xo" or c == "0":
            return _Node("char", at, chars=_folded(_chars(chr(self.code(c)))))
        if c == "c":
            self.i += 1
            return _Node("char", at, chars=_ANY)
        return _Node("char", at, chars=_folded(_chars(_CHAR_ESCAPES.get(c, c))))

    def code(self, c: str) -> int:
        """The character of ``\\x..``, ``\\x{..}``, ``\\o{..}``, ``\\0..`` (just read)."""
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            digits = self.p[self.i + 1 : end] if end > 0 else ""
            self.i = end + 1 if end > 0 else len(self.p)
        else:
            allowed = "0123456789abcdefABCDEF" if c == "x" else "01234567"
            digits = ""
            while len(digits) < 2 and self.peek() and self.peek() in allowed:
                digits += self.peek()
                self.i += 1
        try:
            value = int(digits or "0", 16 if c == "x" else 8)
        except ValueError:
            return 0
        return min(value, _MAX_CODE)

    def char_class(self) -> Ranges:
        at = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if not c:
                raise self.refuse("'[' is not closed", at)
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and self.peek(1) == ":":               # [:alpha:]: any, to be safe
                end = self.p.find(":]", self.i + 2)
                if end >= 0:
                    self.i = end + 2
                    ranges.extend(_ANY)
                    continue
            lo = self.class_char()
            if lo is None:
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_char()
                if hi is None or hi[0] != hi[1] or lo[0] != lo[1]:   # [\d-z]: the three, literally
                    ranges.extend([lo, (ord("-"), ord("-"))] + ([hi] if hi is not None else []))
                elif hi[0] < lo[0]:
                    raise self.refuse("a character range out of order", at)
                else:
                    ranges.append((lo[0], hi[0]))
            else:
                ranges.append(lo)
        out = _normal(ranges)
        return _complement(out) if negated else out

    def class_char(self) -> tuple[int, int] | None:
        """One character or class escape inside ``[...]``, as a range (a class as its hull)."""
        if self.peek() != "\\":
            c = self.peek()
            self.i += 1
            return ord(c), ord(c)
        node = self.escape(in_class=True)
        if node.kind != "char" or not node.chars:
            return None
        if len(node.chars) == 1:
            return node.chars[0]
        return node.chars[0][0], node.chars[-1][1]       # a class escape: its hull, a superset


# ----------------------------------------------------------------- the rule
def _check_large_body(node: _Node, repeat: _Node) -> None:
    """What may stand inside a large repetition (see the module's docstring)."""
    if node.kind == "repeat":
        raise PatternRefused("a quantifier inside a repeated group can backtrack catastrophically "
                             "(nested quantifiers, as in (a+)+)", node.at)
    if node.kind == "look":
        raise PatternRefused("a lookaround inside a repeated group is not allowed", node.at)
    if node.kind == "alt":
        firsts: list[Ranges] = []
        for branch in node.items:
            if _nullable(branch):
                raise PatternRefused("an alternative that matches the empty text inside a repeated group "
                                     "can backtrack catastrophically", branch.at)
            first = _first(branch)
            if any(_overlap(first, seen) for seen in firsts):
                raise PatternRefused("alternatives that can start with the same character inside a repeated "
                                     "group can backtrack catastrophically (as in (a|a)*)", node.at)
            firsts.append(first)
    for item in node.items:
        _check_large_body(item, repeat)


def _unbounded_inside(node: _Node) -> _Node | None:
    """The first large repetition inside *node*, if any."""
    for item in node.items:
        if item.kind == "repeat" and _large(item):
            return item
        found = _unbounded_inside(item)
        if found is not None:
            return found
    return None


def _walk(node: _Node) -> None:
    if node.kind == "repeat" and _large(node):
        body = node.items[0]
        if _nullable(body):
            raise PatternRefused("a repeated group that can match the empty text can backtrack "
                                 "catastrophically", node.at)
        _check_large_body(body, node)
    elif node.kind == "repeat" and (node.high or 0) > 1:
        inner = _unbounded_inside(node)     # (a*){1,3}: each pass multiplies the ways to split the text
        if inner is not None:
            raise PatternRefused("a quantifier inside a repeated group can backtrack catastrophically "
                                 "(nested quantifiers, as in (a+)+)", inner.at)
    for item in node.items:
        _walk(item)


_WAYS_CAP = 10**12


def _ways(node: _Node) -> int:
    """How many ways the pattern's choices (alternatives, small repetitions,
    ``?``) can be taken on one path through *node*, large repetitions
    counted once (where they stop is the polynomial's part); capped."""
    if node.kind in ("char", "assert", "look"):
        return 1
    if node.kind == "seq":
        product = 1
        for item in node.items:
            product = min(product * _ways(item), _WAYS_CAP)
        return product
    if node.kind == "alt":
        return min(sum(_ways(n) for n in node.items), _WAYS_CAP)
    body = _ways(node.items[0])
    if _large(node):
        return body
    total, power = 0, 1
    for k in range((node.high or 0) + 1):
        if k >= node.low:
            total = min(total + power, _WAYS_CAP)
        power = min(power * body, _WAYS_CAP)
    return total


def check_pattern(pattern: str) -> None:
    """Refuse (:class:`PatternRefused`) a pattern that can backtrack catastrophically
    or that uses a construct named in the module's docstring; pass the others."""
    tree = _Parser(pattern).parse()
    _walk(tree)
    if _ways(tree) > MAX_WAYS:
        raise PatternRefused(f"the pattern's choices (alternatives, optional parts and repetitions) combine in "
                             f"more than {MAX_WAYS} ways, as in a?a?a?a?...", 0)
