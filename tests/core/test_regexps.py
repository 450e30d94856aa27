"""The patterns of the ClassAd pattern functions: those that can backtrack
catastrophically are refused with the place of the construct at fault;
the usual ones pass (docs/security.md, "Evaluation cost")."""

from __future__ import annotations

import pytest

from wms.core.regexps import PatternRefused, check_pattern


@pytest.mark.parametrize("pattern, offset, why", [
    ("^(a|a)*$", 2, "alternatives that can start with the same character"),
    ("(a|ab)*", 1, "alternatives that can start with the same character"),
    (r"(\w|\d)+", 1, "alternatives that can start with the same character"),
    ("(a|A)+", 1, "alternatives that can start with the same character"),    # case is folded
    ("((a|a)b){20,}", 2, "alternatives that can start with the same character"),
    ("(a+)+", 2, "a quantifier inside a repeated group"),
    ("(ab?)*", 3, "a quantifier inside a repeated group"),
    ("(.*a){20}", 2, "a quantifier inside a repeated group"),            # 20 > SMALL_REPEAT: large
    ("^" + "a?" * 30 + "a" * 30 + "$", 0, "the pattern's choices"),
    ("^((a?a{1,3}){1,3}){1,3}$", 0, "the pattern's choices"),
    ("^(a*){1,3}a$", 3, "a quantifier inside a repeated group"),         # a small one: no large inside
    ("(a*)*", 4, "a repeated group that can match the empty text"),
    ("(a|)*", 4, "a repeated group that can match the empty text"),
    ("(a?){30}", 4, "a repeated group that can match the empty text"),
    (r"(a)\1", 3, "back-references are not allowed"),
    (r"(?<n>a)\k<n>", 7, "back-references are not allowed"),
    ("(?P=n)", 0, "back-references, recursion"),
    ("(?R)", 0, "back-references, recursion"),
    ("(?(1)a|b)", 0, "back-references, recursion"),
    ("(*SKIP)a", 0, "backtracking control verbs"),
    ("(a", 0, "'(' is not closed"),
    ("[a", 0, "'[' is not closed"),
    ("a)", 1, "unbalanced ')'"),
    ("*a", 0, "nothing to repeat"),
])
def test_a_pattern_that_can_backtrack_catastrophically_is_refused_at_its_construct(pattern, offset, why):
    with pytest.raises(PatternRefused) as refused:
        check_pattern(pattern)
    assert refused.value.message.startswith(why), refused.value.message
    assert refused.value.offset == offset


@pytest.mark.parametrize("pattern", [
    "^abc$", "a*b*c*", "(ab|cd)*", r"^[a-z0-9-]+\.cern\.ch$", r"(\d{1,3}\.){3}\d{1,3}", "x.*y", "(?i)abc",
    "(?:a|b)+", r"\Q(a+)+\E", "[^a]*a", "a{2,5}", "^(foo|bar|baz)$", "(?#a comment)a+", r"\x41+",
    "lx.*-amd64|sol.*", "[(a+)+]", "(?<name>ab)+", "(?=a)b", r"^\s*(\w+)\s*=", "[[:alpha:]]+",
])
def test_an_ordinary_pattern_passes(pattern):
    check_pattern(pattern)
