"""The evaluation budget (wms.core.evaluation): a total held to the budget
times the items, measured again once before a refusal, and a refusal that
gives the figure."""

from __future__ import annotations

import pytest

from wms.core import classad, evaluation

# PCRE tries every way of matching ten .* before it fails: about 0.1 s of CPU,
# and the pattern passes the backtracking check (its cost grows with the text
# as a polynomial, and PCRE's match limit ends it).
SLOW = 'regexp("^.*a.*a.*a.*a.*a.*a.*a.*a.*a.*a.*[cd]$", "' + "a" * 100 + 'b")'
FAST = 'other.CPUTime > 3600 && regexp("^lx.*-amd64$", other.Arch)'


def test_a_fast_expression_is_evaluated_on_every_item():
    results = evaluation.within_budget([{"CPUTime": 7200, "Arch": "lx-amd64"}, {"CPUTime": 60}],
                                       lambda ad: classad.eval_bool(FAST, {}, ad), 0.005, "Requirements")
    assert results == [True, False]


def test_a_slow_expression_is_refused_with_its_cost_against_one_queue():
    with pytest.raises(evaluation.OverBudget) as refused:
        evaluation.within_budget([{}] * 3, lambda ad: classad.eval_bool(SLOW, {}, ad), 0.005, "Requirements")
    assert refused.value.seconds > 0.02
    assert refused.value.limit == 0.005
    assert refused.value.message.startswith("Requirements take ")
    assert refused.value.message.endswith(" ms to evaluate against one queue; the limit is 5.0 ms "
                                          "(limits.evaluation_ms)")


def test_one_slow_measurement_is_measured_again_before_a_refusal(monkeypatch):
    calls = []
    spent = iter([0.0, 0.012, 0.012, 0.013, 0.013, 0.014])     # the clock read before and after each call

    def evaluate(item):
        calls.append(item)
        return True

    # a busy moment, as a clock shows it: 12 ms on the first of two items
    # (over 2 x 5 ms), then 1 ms for both when measured again
    monkeypatch.setattr(evaluation, "clock", lambda: next(spent))
    assert evaluation.within_budget(["q1", "q2"], evaluate, 0.005, "Requirements") == [True, True]
    assert calls == ["q1", "q1", "q2"]


def test_judged_gives_no_figure_within_the_limit_and_the_smaller_of_two_past_it():
    assert evaluation.judged(lambda: classad.eval_bool(FAST, {}, {"CPUTime": 1}), 0.005) == (False, None)
    result, seconds = evaluation.judged(lambda: classad.eval_bool(SLOW, {}, {}), 0.005)
    assert result is None and seconds is not None and seconds > 0.02
