"""What a ClassAd pattern function may cost (wms/core/regexps.py,
docs/security.md "Evaluation cost"): the families that backtrack
exponentially are always refused, and a pattern that passes the check
with one unbounded quantifier runs in time linear in the text, far from
PCRE's match limit (about 0.1 s a call here, which the exponential ones
reach at a few dozen characters); with more, the cost is a polynomial of
that degree, and the evaluation budget's to bound."""

from __future__ import annotations

import time

from hypothesis import example, given
from hypothesis import strategies as st

from wms.core import classad
from wms.core.regexps import PatternRefused, check_pattern

ATOMS = st.sampled_from(["a", "b", "c", "[ab]", "[^c]", ".", r"\w", r"\d", "x"])
QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{1,3}", "{2}"])


def _piece(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    group = st.one_of(
        st.builds(lambda x: f"({x})", inner),
        st.builds(lambda x, y: f"(?:{x}|{y})", inner, inner),
    )
    return st.builds(lambda body, q: body + q, st.one_of(ATOMS, group), QUANTIFIERS)


PATTERNS = st.recursive(st.builds(lambda a, q: a + q, ATOMS, QUANTIFIERS),
                        lambda inner: st.lists(_piece(inner), min_size=1, max_size=4).map("".join),
                        max_leaves=8).map(lambda body: f"^{body}$")


def cost(pattern: str, text: str) -> float:
    """CPU seconds of one regexp() call of classad2 (the pattern and text as ClassAd strings)."""
    expression = f"regexp({classad.render_value(pattern)}, {classad.render_value(text)})"
    classad.eval_bool("true || " + expression)       # compiled (the call itself short-circuited)
    start = time.thread_time()
    classad.eval_bool(expression)
    return time.thread_time() - start


@given(body=st.sampled_from(["a", "ab", "[ab]", ".", r"\w", "a|b"]),
       shape=st.sampled_from(["({x}+)+", "({x}*)*", "({x}|{x})*", "(?:{x}?)*", "({x})\\1", "(?:{x}|{x}c)+",
                              "((?:{x}){{1,3}})*", "({x}|)+"]))
def test_the_exponential_families_are_always_refused(body, shape):
    pattern = shape.format(x=body)
    try:
        check_pattern(pattern)
    except PatternRefused:
        return
    raise AssertionError(f"{pattern!r} passed the check")


@given(pattern=PATTERNS, filler=st.sampled_from(["a", "ab", "a1", "x"]))
@example(pattern="^(?:a|b)*c$", filler="ab")
@example(pattern="^[ab]*(?:a|x)+c$", filler="a")
def test_a_pattern_that_passes_the_check_runs_far_below_the_match_limit(pattern, filler):
    try:
        check_pattern(pattern)
    except PatternRefused:
        return
    # their number is the degree of the polynomial a match may cost: past
    # one, the cost on a long text is the evaluation budget's to bound
    if pattern.count("*") + pattern.count("+") > 1:
        return
    text = filler * (300 // len(filler)) + "!"      # cannot match: every way is tried
    seconds = min(cost(pattern, text), cost(pattern, text))
    assert seconds < 0.03, f"{pattern!r} on {len(text)} characters took {seconds * 1000:.0f} ms"
