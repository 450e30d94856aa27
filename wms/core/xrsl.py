"""The little of ARC's xRSL job description language the ``arc`` backend
writes and checks: quoted values, and a site's extra relations
(``ARCRSL``, such as ``(walltime="120")(memory="2000")``) read far enough
to know that they are whole relations and which attributes they set.

A value is written between double quotes, a double quote inside doubled
(xRSL's own rule for literal strings).
"""

from __future__ import annotations


# Attributes the arc backend writes itself: what runs, what travels, the
# output it fetches, the job's name and queue. A site's ARCRSL changing
# them would break the pilot's start or its bookkeeping.
RESERVED_ATTRIBUTES = frozenset({
    "executable", "arguments", "inputfiles", "outputfiles", "executables", "stdin", "stdout", "stderr", "join",
    "jobname", "queue", "gmlog",
})
_OPERATORS = ("!=", "<=", ">=", "=", "<", ">")


def quote(value: str) -> str:
    """``value`` as an xRSL literal: in double quotes, inner ones doubled."""
    if "\n" in value or "\r" in value or "\0" in value:
        raise ValueError(f"an xRSL value may not hold a line break or NUL: {value!r}")
    return '"' + value.replace('"', '""') + '"'


def relation_attributes(text: str) -> list[str]:
    """The attributes a sequence of relations ``(name op value...)...`` sets, in order.

    Raises ValueError saying what is wrong: text outside a relation, an
    unbalanced parenthesis or quote, a relation without an attribute name
    or an operator.
    """
    names: list[str] = []
    position, end = 0, len(text)
    while True:
        while position < end and text[position].isspace():
            position += 1
        if position == end:
            return names
        if text[position] != "(":
            raise ValueError(f"expected '(' at character {position + 1}, found {text[position]!r}")
        close = _relation_end(text, position)
        names.append(_attribute(text[position + 1:close], position))
        position = close + 1


def _relation_end(text: str, start: int) -> int:
    """The index of the ')' closing the relation opened at ``start``."""
    depth, position, quoted = 0, start, False
    while position < len(text):
        char = text[position]
        if quoted:
            if char == '"':
                if text[position + 1:position + 2] == '"':
                    position += 1            # a doubled quote: still inside
                else:
                    quoted = False
        elif char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return position
        position += 1
    what = "a quoted value" if quoted else "a relation"
    raise ValueError(f"{what} opened at character {start + 1} is not closed")


def _attribute(body: str, start: int) -> str:
    stripped = body.lstrip()
    name = ""
    for char in stripped:
        if not (char.isalnum() or char in "_-"):
            break
        name += char
    rest = stripped[len(name):].lstrip()
    if not name:
        raise ValueError(f"the relation at character {start + 1} has no attribute name")
    if not rest.startswith(_OPERATORS):
        raise ValueError(f"the relation at character {start + 1} ({name}) has no operator (=, !=, <, >, <=, >=)")
    return name.casefold()
