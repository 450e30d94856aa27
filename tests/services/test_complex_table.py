"""qconf -sc / -Mc at run time: the complex table shown, replaced whole or
refused whole, and adopted by every server process."""

from __future__ import annotations

import pytest

from tests.helpers import ADMIN, OPERATOR, ROLAND, default_config
from wms.core.errors import Forbidden, InvalidInput, JDLError
from wms.services import complexes, quotas, reservations
from wms.services import runtime as runtime_module
from wms.services.pilots import waiting_jobs_per_queue
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

SCRATCH = "scratch             sc         MEMORY      <=    YES         YES        0        0"


def test_show_prints_the_table_as_qconf_does(runtime):
    text = complexes.show(runtime)
    lines = text.splitlines()
    assert lines[0].startswith("#name") and lines[1].startswith("#---")
    assert any(line.split()[:2] == ["compiler_lic", "cl"] for line in lines)
    assert any(line.split()[:3] == ["slots", "s", "INT"] for line in lines)


def test_a_manager_adds_an_attribute_and_every_process_adopts_it(runtime, now):
    job = '[ Executable = "/bin/true"; ResourceRequests = [ scratch = "1G"; ]; ]'
    with pytest.raises(JDLError, match="unknown resource 'scratch'"):
        submit_jobs(runtime, ROLAND, [("a.jdl", job)], SubmitOptions(), now)
    text = complexes.show(runtime) + "\n" + SCRATCH + "\n"
    messages = complexes.modify(runtime, ADMIN, text, now)
    assert len(messages) == 1 and messages[0].endswith('added "scratch" to complex entry list')
    assert messages[0].startswith("admin@")
    assert submit_jobs(runtime, ROLAND, [("a.jdl", job)], SubmitOptions(), now)
    # Another server process on the same database.
    other = Runtime.create(default_config(), runtime.engine)
    assert "scratch" in complexes.show(other)
    assert complexes.modify(runtime, ADMIN, complexes.show(runtime), now) == ["complex entry list unchanged"]


def test_a_process_that_never_asks_still_adopts_a_stored_table(runtime, now, monkeypatch):
    """The SiteDirector's count of waiting jobs reads the table like any
    other reader: no entry point has to remember to look for a new one."""
    monkeypatch.setattr(runtime_module, "COMPLEXES_SYNC_INTERVAL", 0.0)
    director = Runtime.create(default_config(), runtime.engine)
    assert "scratch" not in {cx.name for cx in director.read_stored_complexes()}
    complexes.modify(runtime, ADMIN, complexes.show(runtime) + "\n" + SCRATCH + "\n", now)
    job = '[ Executable = "/bin/true"; ResourceRequests = [ scratch = "1G"; ]; ]'
    submit_jobs(runtime, ROLAND, [("a.jdl", job)], SubmitOptions(), now)
    waiting = waiting_jobs_per_queue(director)
    assert sum(entry["waiting"] for entry in waiting.values()) > 0
    assert "scratch" in {cx.name for cx in director.read_stored_complexes()}



def test_what_is_read_against_the_table_follows_a_new_one_in_every_process(runtime, now, monkeypatch):
    """The quota sets in force and the reservation candidates carry the table
    they were read with; another process's qconf -Mc replaces them here too."""
    monkeypatch.setattr(runtime_module, "COMPLEXES_SYNC_INTERVAL", 0.0)
    other = Runtime.create(default_config(), runtime.engine)
    state, found = quotas.sync(other), reservations.candidates(other)
    assert state.table is found.table is other.read_stored_complexes()
    assert quotas.sync(other) is state and reservations.candidates(other) is found     # kept while the table holds
    complexes.modify(runtime, ADMIN, complexes.show(runtime) + "\n" + SCRATCH + "\n", now)
    state_after, found_after = quotas.sync(other), reservations.candidates(other)
    assert "scratch" in state_after.table and state_after.table is found_after.table
    assert state_after.sets == state.sets and [c.label for c in found_after.candidates] == \
        [c.label for c in found.candidates]

def test_only_managers_modify(runtime, now):
    for caller in (ROLAND, OPERATOR):
        with pytest.raises(Forbidden, match="must be manager"):
            complexes.modify(runtime, caller, complexes.show(runtime), now)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t + "\nlic l INT >= YES YES 0 0\n", 'Consumable "lic" can have only <= as an relational operator'),
        (lambda t: t + "\nbroken line\n", "expected 8 columns"),
        (lambda t: "\n".join(x for x in t.splitlines() if not x.startswith("arch ")),
         'arch'),
        (lambda t: "\n".join(x for x in t.splitlines() if not x.startswith("compiler_lic ")),
         "the new complex table does not fit the configuration"),
    ],
)
def test_a_bad_table_is_refused_whole(runtime, now, change, message):
    before = complexes.show(runtime)
    with pytest.raises(InvalidInput) as err:
        complexes.modify(runtime, ADMIN, change(before), now)
    assert message in str(err.value)
    assert complexes.show(runtime) == before
