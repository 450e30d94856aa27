"""The local backend's output: the log its pilot writes as it runs, read
while it runs and after it ended (its other parts: tests/agents/test_site_director.py)."""

from __future__ import annotations

import pytest

from tests.helpers import wait_until
from tests.pilot_backends import NO_SERVER, QUICK_PILOT, queue_ref, wait_for_states
from wms.backends.base import PilotArgs
from wms.backends.local import LocalBackend
from wms.core.errors import InvalidInput


def test_a_pilot_s_output_is_its_log_while_it_runs_and_after(tmp_path):
    backend = LocalBackend(log_dir=tmp_path)
    waits = (*QUICK_PILOT, "--max-empty", "1000")          # the last one given counts: it waits to be stopped
    [ref] = backend.submit_pilots(queue_ref(), 1, PilotArgs(url=NO_SERVER, token="wms_secret", pilot_ids=("long",),
                                                            argv=waits))
    wait_until(lambda: "starting against" in (backend.output(ref, 1 << 20) or ""), timeout=60,
               what="the pilot's start in its output", details=lambda: backend.output(ref, 1 << 20))
    backend.kill(ref)
    assert wait_for_states(backend, [ref], {"Done", "Failed"})[ref] in ("Done", "Failed")
    log = (tmp_path / "long.log").read_text()
    assert backend.output(ref, 1 << 20) == log and "pilot long starting" in log
    assert backend.output(ref, 10) == f"(the last 10 bytes of {len(log.encode())})\n{log[-10:]}"


def test_a_pilot_without_a_log_has_no_output_and_a_foreign_reference_is_refused(tmp_path):
    backend = LocalBackend(log_dir=tmp_path)
    assert backend.output("elsewhere:1:never-ran", 1 << 20) is None
    with pytest.raises(InvalidInput, match="not a local pilot reference: '12:p'"):
        backend.output("12:p", 1 << 20)
