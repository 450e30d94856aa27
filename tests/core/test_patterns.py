"""sge_types(1) wildcard expressions: examples.md sections 1.3 and 2, SPEC 000
section 5 and complex(5)'s ``-l arch=...`` examples, as tables."""

from __future__ import annotations

import pytest

from wms.core.errors import InvalidInput
from wms.core.patterns import compile_pattern, is_pattern, match_pattern

MATCH, NO_MATCH, ERROR = "MATCH", "NO MATCH", "ERROR"
CASELESS = {"CSTRING", "HOST"}

# examples.md section 2 (RUN-SGE), every row: (type, request, value, expected)
SECTION_2 = [
    ("RESTRING", "lx*-amd64|sol*", "lx-amd64", MATCH),
    ("RESTRING", "lx*-amd64|sol*", "lx24-amd64", MATCH),
    ("RESTRING", "lx*-amd64|sol*", "sol-sparc64", MATCH),
    ("RESTRING", "lx*-amd64|sol*", "lx-x86", NO_MATCH),
    ("RESTRING", "(lx*|sol*)&*64*", "lx-amd64", MATCH),
    ("RESTRING", "(lx*|sol*)&*64*", "lx-x86", NO_MATCH),
    ("RESTRING", "(lx*|sol*)&*64*", "darwin-x64", NO_MATCH),
    ("RESTRING", "rh_3*&!rh_3.1", "rh_3.2", MATCH),
    ("RESTRING", "rh_3*&!rh_3.1", "rh_3.1", NO_MATCH),
    ("RESTRING", "a*&!adam", "anna", MATCH),
    ("RESTRING", "a*&!adam", "adam", NO_MATCH),
    ("RESTRING", "big_*&!*1", "big_q2", MATCH),
    ("RESTRING", "big_*&!*1", "big_q1", NO_MATCH),
    ("RESTRING", "!lx*&!sol*", "darwin-x86", MATCH),
    ("RESTRING", "!a*", "ba", MATCH),
    ("RESTRING", "!!a", "a", MATCH),
    ("RESTRING", "!(a|b)", "a", NO_MATCH),
    ("RESTRING", "a|b&c", "a", MATCH),
    ("RESTRING", "a|b&c", "b", NO_MATCH),
    ("RESTRING", "a | b", "b", MATCH),
    ("RESTRING", "a b|c", "a", ERROR),
    ("RESTRING", "a b", "a b", MATCH),
    ("RESTRING", "h[0-9][0-9]", "h07", MATCH),
    ("RESTRING", "h[0-9][0-9]", "h7", NO_MATCH),
    ("RESTRING", "host[1-3]|host10", "host10", MATCH),
    ("RESTRING", "host[1-3]|host10", "host4", NO_MATCH),
    ("RESTRING", "*.cern.ch", "cern.ch", NO_MATCH),
    ("RESTRING", "file?txt", "file.txt", MATCH),
    ("RESTRING", "*", "", MATCH),
    ("RESTRING", "?", "", NO_MATCH),
    ("RESTRING", "a\\*", "a*", MATCH),
    ("RESTRING", "a\\*", "ab", NO_MATCH),
    ("RESTRING", "a\\?b\\\\c*", "a?b\\cd", MATCH),
    ("RESTRING", "x\\y*", "xy", MATCH),
    ("RESTRING", "x\\y", "xy", NO_MATCH),
    ("RESTRING", "x\\y", "x\\y", MATCH),
    ("RESTRING", "a\\|b", "a|b", NO_MATCH),
    ("RESTRING", "a\\|b", "b", MATCH),
    ("RESTRING", "[^a]bc", "abc", NO_MATCH),
    ("RESTRING", "[^a]bc", "xbc", MATCH),
    ("RESTRING", "[!a]bc", "xbc", ERROR),
    ("RESTRING", "(a|b", "a", ERROR),
    ("RESTRING", "a)", "a", ERROR),
    ("RESTRING", "a||b", "b", ERROR),
    ("RESTRING", "&a", "a", ERROR),
    ("RESTRING", "lx*|", "lx", ERROR),
    ("STRING", "lx*", "lx-amd64", MATCH),
    ("STRING", "Linux", "linux", NO_MATCH),
    ("STRING", "lx-AMD64", "LX-amd64", NO_MATCH),
    ("CSTRING", "Linux", "linux", MATCH),
    ("CSTRING", "SOL*&!*X86", "sol-x86", NO_MATCH),
    ("CSTRING", "SOL*&!*X86", "sol-amd64", MATCH),
    ("HOST", "NODE1", "node1", MATCH),
    ("HOST", "*.CERN.ch", "lxb01.cern.ch", MATCH),
    ("HOST", "durin|carc", "CARC", MATCH),
]

# examples.md 1.3 (complex(5) STRING examples, RUN-SGE with RESTRING) and
# SPEC 000 section 5 / complex(5) examples.
COMPLEX_5 = [
    ("RESTRING", "*x*|sol*", "lx-amd64", MATCH),
    ("RESTRING", "*x*|sol*", "sol-sparc64", MATCH),
    ("RESTRING", "*x*|sol*", "darwin-ppc", NO_MATCH),
    ("RESTRING", "sol-x??", "sol-x86", MATCH),
    ("RESTRING", "sol-x??", "sol-x8", NO_MATCH),
    ("RESTRING", "lx2[246]-x86", "lx24-x86", MATCH),
    ("RESTRING", "lx2[246]-x86", "lx25-x86", NO_MATCH),
    ("RESTRING", "lx2[4-6]-x86", "lx25-x86", MATCH),
    ("RESTRING", "lx2[24-6]-x86", "lx22-x86", MATCH),
    ("RESTRING", "lx2[24-6]-x86", "lx23-x86", NO_MATCH),
    ("RESTRING", "!lx-x86&!sol-amd64", "lx-amd64", MATCH),
    ("RESTRING", "!lx-x86&!sol-amd64", "sol-amd64", NO_MATCH),
    # "|" splits the bracket: lx2[4 OR 6]-amd64 (section 9 item 1; SPEC 000 agrees)
    ("RESTRING", "lx2[4|6]-amd64", "lx24-amd64", NO_MATCH),
    ("RESTRING", "lx2[4|6]-amd64", "lx26-amd64", NO_MATCH),
    ("RESTRING", "lx2[4|6]-amd64", "lx2[4", MATCH),
    ("RESTRING", "lx2[4|6]-amd64", "6]-amd64", MATCH),
    # SPEC 000: arch="linux|solaris" is linux OR solaris
    ("RESTRING", "linux|solaris", "linux", MATCH),
    ("RESTRING", "linux|solaris", "solaris", MATCH),
    ("RESTRING", "linux|solaris", "hpux", NO_MATCH),
    # SPEC 000: arch="[linux|solaris]" is "[linux" OR "solaris]"
    ("RESTRING", "[linux|solaris]", "linux", NO_MATCH),
    ("RESTRING", "[linux|solaris]", "solaris", NO_MATCH),
    ("RESTRING", "[linux|solaris]", "[linux", MATCH),
    ("RESTRING", "[linux|solaris]", "solaris]", MATCH),
    # examples.md 1.2: the arch request of the relop table
    ("RESTRING", "lx*-amd64|sol*", "darwin-x86", NO_MATCH),
]

# Further behaviour stated in the module docstring.
MORE = [
    ("RESTRING", "[]a]x", "]x", MATCH),  # "]" first in a set is a member
    ("RESTRING", "[a-]x", "-x", MATCH),  # "-" last in a set is a member
    ("RESTRING", "[[:digit:]]*", "7up", MATCH),
    ("RESTRING", "[[:digit:]]*", "up", NO_MATCH),
    ("RESTRING", "[z-a]*", "a", NO_MATCH),  # an empty range matches nothing
    ("RESTRING", "a*\\", "a\\", NO_MATCH),  # trailing lone backslash never matches
    ("RESTRING", "*", "/usr/.hidden", MATCH),  # "*" also matches "/" and "."
    ("RESTRING", "", "", MATCH),
    ("RESTRING", "", "x", NO_MATCH),
    ("RESTRING", "((a))", "a", MATCH),
    ("RESTRING", "!(a|b)&c*", "cab", MATCH),
    ("RESTRING", "[a-z]&!b", "b", NO_MATCH),
    ("RESTRING", "[[:nosuch:]]", "a", ERROR),
    ("RESTRING", "()", "a", ERROR),
    ("RESTRING", "!", "a", ERROR),
]


def outcome(type_: str, request: str, value: str) -> str:
    try:
        pattern = compile_pattern(request)
    except InvalidInput:
        return ERROR
    return MATCH if pattern.matches(value, ignore_case=type_ in CASELESS) else NO_MATCH


@pytest.mark.parametrize("type_, expression, value, expected", SECTION_2 + COMPLEX_5 + MORE)
def test_expression_table(type_, expression, value, expected):
    assert outcome(type_, expression, value) == expected


@pytest.mark.parametrize("type_, expression, value, expected", [row for row in SECTION_2 if row[3] != ERROR])
def test_match_pattern_agrees(type_, expression, value, expected):
    assert match_pattern(expression, value, ignore_case=type_ in CASELESS) is (expected == MATCH)


@pytest.mark.parametrize(
    "text, message",
    [
        ("a b|c", "invalid wildcard expression 'a b|c': unexpected pattern 'b'; expected '&', '|' or the end at position 3"),
        ("[!a]bc", "invalid wildcard expression '[!a]bc': unexpected '!'; expected '&', '|' or the end at position 2"),
        ("(a|b", "invalid wildcard expression '(a|b': unexpected end of expression; expected ')' at position 5"),
        ("a)", "invalid wildcard expression 'a)': unexpected ')'; expected '&', '|' or the end at position 2"),
        ("a||b", "invalid wildcard expression 'a||b': unexpected '|'; expected a pattern, '!' or '(' at position 3"),
        ("&a", "invalid wildcard expression '&a': unexpected '&'; expected a pattern, '!' or '(' at position 1"),
        ("lx*|", "invalid wildcard expression 'lx*|': unexpected end of expression; expected a pattern, '!' or '(' at position 5"),
        ("[[:nosuch:]]", "invalid wildcard expression '[[:nosuch:]]': unknown character class '[:nosuch:]' at position 1"),
    ],
)
def test_syntax_errors_name_text_and_position(text, message):
    with pytest.raises(InvalidInput) as caught:
        compile_pattern(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "text, expected",
    [("lx-amd64", False), ("a b", False), ("x\\y", False), ("lx*", True), ("a|b", True),
     ("!a", True), ("(a)", True), ("h[1]", True), ("a&b", True), ("a?", True), ("a]", True)],
)
def test_is_pattern(text, expected):
    assert is_pattern(text) is expected


def test_compiled_patterns_are_cached():
    assert compile_pattern("lx*|sol*") is compile_pattern("lx*|sol*")


def test_ignore_case_lowers_both_sides():
    pattern = compile_pattern("LX[A-Z]*")
    assert not pattern.matches("lxa")
    assert pattern.matches("lxa", ignore_case=True)
    assert pattern.matches("LXA", ignore_case=True)


def test_non_string_refused():
    with pytest.raises(InvalidInput):
        compile_pattern(5)  # type: ignore[arg-type]
