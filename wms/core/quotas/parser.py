"""The rule-set language of specs/001 ("Resource Quota Rules", the grammar)
and sge_resource_quota(5) FORMAT, read into ``model`` values.

    {
       name         ruleset1
       description  "licences"
       enabled      true
       limit        users roland to compiler_lic=3
       limit        name per_host hosts {@lx_hosts} to slots=$num_proc*5
    }

A set is ``{`` .. ``}``; inside, one attribute per line: ``name``,
``enabled``, ``description`` and any number of ``limit`` rules. A
backslash at the end of a line joins the next one; ``#`` starts a comment.
The filters of a rule come in any order; the printer puts them in one.
Every problem is refused with the line and what is wrong
(``rule_set.txt:4: ...``), so nothing half-read is ever stored.

Where the specification's grammar and its examples differ, the examples
win: a set without rules is accepted (the qconf transcripts add such
sets), and every filter may use ``!`` and braces (sge_resource_quota(5)
shows ``projects !*`` and ``hosts {*}``). ``@group`` names only user sets
(users) and host groups (hosts).
"""

from __future__ import annotations

import re

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable, ValueType
from wms.core.errors import InvalidInput
from wms.core.patterns import compile_pattern
from wms.core.quotas.model import FILTER_KINDS, Filter, Limit, Rule, RuleSet, Term

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
RULE_KEYWORDS = ("name", *FILTER_KINDS, "to")
SET_ATTRIBUTES = ("name", "enabled", "description", "limit")
TRUE_WORDS = frozenset({"true", "1"})
FALSE_WORDS = frozenset({"false", "0"})
GROUP_FILTERS = frozenset({"users", "hosts"})
NUMBER = re.compile(r"\d+(\.\d*)?([eE][+-]?\d+)?\Z|\.\d+([eE][+-]?\d+)?\Z")
DYNAMIC_TERM = re.compile(r"\$([A-Za-z][A-Za-z0-9_]*)(?:\*([0-9.eE]+))?\Z")

MSG_NAME = "invalid {what} {name!r}: a name starts with a letter, then letters, digits, '_' or '-'"


class QuotaSyntaxError(InvalidInput):
    """A rule-set text that does not read; ``where`` is ``source:line``."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash-newline joins and comments removed."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1] + " ")
            continue
        pending.append(line)
        out.append((start, "".join(pending)))
        pending = []
    if pending:
        out.append((start, "".join(pending)))
    return out


def _strip_comment(line: str) -> str:
    quoted = False
    for index, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:index]
    return line


def _closes_set(line: str) -> bool:
    """A ``}`` that is not the end of a brace filter ends the set."""
    opened = closed = 0
    quoted = False
    for char in line:
        if char == '"':
            quoted = not quoted
        elif not quoted and char == "{":
            opened += 1
        elif not quoted and char == "}":
            closed += 1
    return line.endswith("}") and closed > opened


class _Reader:
    def __init__(self, source: str, table: ComplexTable | None) -> None:
        self.source = source
        self.table = table

    def fail(self, line: int, message: str) -> QuotaSyntaxError:
        return QuotaSyntaxError(message, where=f"{self.source}:{line}")

    # ------------------------------------------------------------------ sets
    def read(self, text: str) -> list[RuleSet]:
        sets: list[RuleSet] = []
        current: dict | None = None
        for number, line in _logical_lines(text):
            rest = line.strip()
            while rest:
                if current is None:
                    if not rest.startswith("{"):
                        raise self.fail(number, f"expected '{{' to begin a resource quota set, got {rest.split()[0]!r}")
                    current = {"line": number, "rules": [], "rule_lines": []}
                    rest = rest[1:].strip()
                    continue
                if _closes_set(rest):
                    body = rest[:-1].strip()
                    if body:
                        self.attribute(current, number, body)
                    sets.append(self.finish(current, number, sets))
                    current = None
                    rest = ""
                    continue
                self.attribute(current, number, rest)
                rest = ""
        if current is not None:
            raise self.fail(current["line"], "missing '}' at the end of the resource quota set"
                            + (f" {current['name']!r}" if "name" in current else ""))
        return sets

    def finish(self, current: dict, number: int, sets: list[RuleSet]) -> RuleSet:
        if "name" not in current:
            raise self.fail(current["line"], "the resource quota set has no name")
        name = current["name"]
        if any(s.name == name for s in sets):
            raise self.fail(current["line"], f"resource quota set {name!r} is defined twice")
        names: dict[str, int] = {}
        for rule, line in zip(current["rules"], current["rule_lines"]):
            if rule.name is None:
                continue
            if rule.name in names:
                raise self.fail(line, f"rule name {rule.name!r} is used twice in resource quota set {name!r}")
            if rule.name.isdigit():
                raise self.fail(line, f"rule name {rule.name!r} would be read as a rule number")
            names[rule.name] = line
        return RuleSet(name=name, rules=tuple(current["rules"]), enabled=current.get("enabled", False),
                       description=current.get("description", ""))

    def attribute(self, current: dict, number: int, line: str) -> None:
        keyword, _, value = line.partition(" ")
        value = value.strip()
        if keyword not in SET_ATTRIBUTES:
            raise self.fail(number, f"unknown attribute {keyword!r} (expected name, enabled, description or limit)")
        if keyword == "limit":
            current["rules"].append(self.rule(number, value))
            current["rule_lines"].append(number)
            return
        if keyword in current:
            raise self.fail(number, f"{keyword!r} is given twice in one resource quota set")
        if keyword == "name":
            if not NAME.match(value):
                raise self.fail(number, MSG_NAME.format(what="resource quota set name", name=value))
            current["name"] = value
        elif keyword == "enabled":
            word = value.lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                raise self.fail(number, f"enabled must be true or false, got {value!r}")
            current["enabled"] = word in TRUE_WORDS
        else:
            current["description"] = self.description(number, value)

    def description(self, number: int, value: str) -> str:
        if value.startswith('"'):
            if len(value) < 2 or not value.endswith('"') or '"' in value[1:-1]:
                raise self.fail(number, f"description must be one quoted string, got {value}")
            return value[1:-1]
        return "" if value.upper() == "NONE" else value

    # ------------------------------------------------------------------ rules
    def rule(self, number: int, text: str) -> Rule:
        words = text.split()
        fields: dict[str, str] = {}
        index = 0
        while index < len(words):
            keyword = words[index]
            if keyword not in RULE_KEYWORDS:
                raise self.fail(number, f"unexpected {keyword!r} in a rule (expected {', '.join(RULE_KEYWORDS)})")
            if keyword in fields:
                raise self.fail(number, f"{keyword!r} is given twice in one rule")
            index += 1
            parts: list[str] = []
            while index < len(words) and words[index] not in RULE_KEYWORDS:
                parts.append(words[index])
                index += 1
            if not parts:
                raise self.fail(number, f"{keyword!r} needs a value")
            fields[keyword] = self.join(number, keyword, parts)
        if "to" not in fields:
            raise self.fail(number, "a rule needs 'to' and its limits (limit ... to resource=value)")
        name = fields.get("name")
        if name is not None and not NAME.match(name):
            raise self.fail(number, MSG_NAME.format(what="rule name", name=name))
        filters = {kind: self.filter(number, kind, fields[kind]) for kind in FILTER_KINDS if kind in fields}
        limits = self.limits(number, fields["to"], filters.get("hosts"))
        return Rule(limits=limits, name=name, **filters)

    def join(self, number: int, keyword: str, parts: list[str]) -> str:
        """Words of one value: list items need commas (``a, b`` and ``{ a,b }`` are fine)."""
        text = parts[0]
        for part in parts[1:]:
            if not (text.endswith((",", "{")) or part.startswith((",", "}")) or part == "=" or text.endswith("=")):
                raise self.fail(number, f"expected ',' between {text.split(',')[-1]!r} and {part!r} in {keyword!r}")
            text += part
        return text

    def filter(self, number: int, kind: str, text: str) -> Filter:
        expand = text.startswith("{")
        if expand != text.endswith("}") or text.count("{") != int(expand) or text.count("}") != int(expand):
            raise self.fail(number, f"unbalanced braces in the {kind} filter {text!r}")
        inner = text[1:-1] if expand else text
        scope: list[str] = []
        xscope: list[str] = []
        for item in inner.split(","):
            excluded = item.startswith("!")
            name = item[1:] if excluded else item
            if not name:
                raise self.fail(number, f"empty name in the {kind} filter {text!r}")
            if name.startswith("@"):
                if kind not in GROUP_FILTERS:
                    raise self.fail(number, f"{name!r}: groups may be named only in users and hosts filters")
                if not NAME.match(name[1:]) and not name[1:].replace(".", "").replace("_", "").isalnum():
                    raise self.fail(number, f"invalid group name {name!r} in the {kind} filter")
            else:
                try:
                    compile_pattern(name)
                except InvalidInput as exc:
                    raise self.fail(number, f"{kind} filter: {exc.message}") from None
            (xscope if excluded else scope).append(name)
        return Filter(scope=tuple(scope), xscope=tuple(xscope), expand=expand)

    # ------------------------------------------------------------------ limits
    def limits(self, number: int, text: str, hosts: Filter | None) -> tuple[Limit, ...]:
        out: list[Limit] = []
        for pair in text.split(","):
            resource, equals, value = pair.partition("=")
            if not equals or not resource or not value:
                raise self.fail(number, f"expected resource=value after 'to', got {pair!r}")
            if self.table is not None:
                cx = self.table.get(resource)
                if cx is None:
                    raise self.fail(number, f"unknown resource {resource!r} in a limit")
                resource = cx.name
            if any(lim.resource == resource for lim in out):
                raise self.fail(number, f"{resource!r} is limited twice in one rule")
            out.append(self.limit(number, resource, value, hosts))
        return tuple(out)

    def limit(self, number: int, resource: str, value: str, hosts: Filter | None) -> Limit:
        if "$" not in value:
            if self.table is not None:
                try:
                    cx_rules.parse_value(self.table.resolve(resource), value)
                except InvalidInput as exc:
                    raise self.fail(number, f"limit {resource}={value}: {exc.message}") from None
            return Limit(resource, value)
        terms = self.terms(number, resource, value)
        if hosts is None or not hosts.expand:
            raise self.fail(number, f"the dynamic limit {resource}={value} needs an expanded host filter "
                            "(hosts {..}): it is evaluated per host")
        if self.table is not None:
            cx = self.table.resolve(resource)
            if cx.type not in cx_rules.NUMERIC_TYPES:
                raise self.fail(number, f"the dynamic limit {resource}={value}: {resource} is not numeric")
            for term in terms:
                if term.complex is None:
                    continue
                ref = self.table.get(term.complex)
                if ref is None:
                    raise self.fail(number, f"the dynamic limit {resource}={value} names an unknown complex "
                                    f"{term.complex!r}")
                if ref.type not in (ValueType.INT, ValueType.DOUBLE):
                    raise self.fail(number, f"the dynamic limit {resource}={value}: ${term.complex} is not INT "
                                    "or DOUBLE")
        return Limit(resource, value, terms)

    def terms(self, number: int, resource: str, value: str) -> tuple[Term, ...]:
        """``{w|$complex[*w]}[{+|-}..]``: weights are positive numbers."""
        out: list[Term] = []
        for sign, body in re.findall(r"([+-]?)([^+-]*)", value)[:-1] or [("", value)]:
            match = DYNAMIC_TERM.match(body)
            if match is not None and (match.group(2) is None or NUMBER.match(match.group(2))):
                weight = float(match.group(2)) if match.group(2) else 1.0
                out.append(Term(weight, match.group(1), -1 if sign == "-" else 1))
            elif NUMBER.match(body):
                out.append(Term(float(body), None, -1 if sign == "-" else 1))
            else:
                raise self.fail(number, f"invalid dynamic limit {resource}={value}: {body!r} is not a weight or "
                                "$complex[*weight]")
            if not out[-1:] or (sign == "" and len(out) > 1):
                raise self.fail(number, f"invalid dynamic limit {resource}={value}: terms are joined by + or -")
        return tuple(out)


def parse_rule_sets(text: str, table: ComplexTable | None = None, *, source: str = "rule sets") -> list[RuleSet]:
    """Read every rule set of ``text``; with ``table``, limits are checked against the complexes."""
    return _Reader(source, table).read(text)
