"""What the Matcher tells the metrics (wms/services/telemetry.py): each answer
counted once, a no-match under the layer that decided it, and the claims it
had to try again; on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests.services.test_matcher import pilot, submit
from wms.core.match.verdict import Code, Verdict
from wms.core.reasons import Reason
from wms.services import matcher, telemetry

pytestmark = pytest.mark.databases

PLAIN = '[ Executable = "/bin/true"; CPUTime = 300; ]'
FIVE_LICENCES = '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ compiler_lic = 5; ]; ]'


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def answers(outcome: str, layer: str) -> float:
    return counted("wms_match_requests_total", outcome=outcome, layer=layer)


def test_a_match_and_a_no_match_with_nothing_waiting(runtime, now):
    before = answers("matched", ""), answers("no_match", telemetry.NO_CANDIDATE)
    assert matcher.request_job(runtime, pilot("p0"), now).layer == telemetry.NO_CANDIDATE
    submit(runtime, now, PLAIN)
    assert matcher.request_job(runtime, pilot("p1"), now).job is not None
    assert (answers("matched", ""), answers("no_match", telemetry.NO_CANDIDATE)) == (before[0] + 1, before[1] + 1)


def test_a_no_match_is_counted_under_the_layer_that_decided(runtime, now):
    submit(runtime, now, FIVE_LICENCES)             # the local queue has 2 licences: never there
    result = matcher.request_job(runtime, pilot("p1"), now)
    assert result.job is None and result.layer == "queue", result
    assert "compiler_lic" in result.reason
    assert answers("no_match", "queue") >= 1


def test_a_full_queue_is_a_claim_tried_again_and_a_queue_no_match(runtime, now):
    submit(runtime, now, *[PLAIN] * 5)              # the local queue grants 4 slots
    for n in range(4):
        assert matcher.request_job(runtime, pilot(f"p{n}"), now).job is not None
    retries = counted("wms_claim_retries_total", cause=telemetry.DOES_NOT_FIT)
    full = matcher.request_job(runtime, pilot("p5"), now)
    assert full.job is None and full.layer == "queue", full
    assert counted("wms_claim_retries_total", cause=telemetry.DOES_NOT_FIT) == retries + 1


@pytest.mark.parametrize("layers, deciding", [
    (["quota", "queue", "queue"], "queue"),          # the most task queues
    (["queue", "quota"], "quota"),                   # a tie: the first in layer order
    (["requirements", "pools", "requirements"], "requirements"),
    (["host"], "host"),
])
def test_the_deciding_layer_of_several_denials(layers, deciding):
    denials = matcher.Denials()
    for layer in layers:
        denials.add(Verdict(Code.NEVER, layer, Reason(f"NO_BY_{layer.upper()}", f"no by {layer}")))
    assert denials.deciding_layer() == deciding
