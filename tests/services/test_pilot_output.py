"""`wms pilots --output`: what a SiteDirector pilot printed, asked of the
backend that started it (each reads the log it keeps in pilot_log_dir)."""

from __future__ import annotations

import pytest

from wms.backends.arc_jobs import ArcRef
from wms.backends.ssh_jobs import SshTarget
from wms.core.errors import InvalidInput, NotFound
from wms.db import pilots as pilots_db
from wms.services import pilot_output
from wms.services.retry import run_in_transaction

pytestmark = pytest.mark.databases

REFS = {
    "local": "node1:4242:p-local",
    "slurm": "12:p-slurm",
    "ssh": SshTarget(host="node.example.org", user="pilot").ref("77", "p-ssh"),
    "arc": str(ArcRef("https://ce.example.org:443/arex", "abc123", "p-arc", "0" * 16)),
}


def record(runtime, now, pilot_id, backend, ref=""):
    run_in_transaction(runtime.engine, lambda conn: pilots_db.add_pilots(conn, [
        {"pilot_id": pilot_id, "site": "S", "ce": "C", "queue": "Q", "backend": backend, "backend_ref": ref,
         "state": "Running", "submitted": now}]))


@pytest.fixture
def logs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                      # pilot_log_dir is var/pilots, relative
    return tmp_path / "var" / "pilots"


def test_each_backend_gives_the_log_it_keeps_and_none_before_there_is_one(runtime, now, logs):
    for backend, ref in REFS.items():
        pilot_id = f"p-{backend}"
        record(runtime, now, pilot_id, backend, ref)
        # The ssh and ARC pilots' logs come back when they end; nothing before.
        with pytest.raises(NotFound, match=f"pilot {pilot_id} has no log in var/pilots \\(yet\\)"):
            pilot_output.pilot_output(runtime, pilot_id)
    logs.mkdir(parents=True)
    for backend in REFS:
        (logs / f"p-{backend}.log").write_text(f"pilot p-{backend} starting\nend\n")
    for backend in REFS:
        assert pilot_output.pilot_output(runtime, f"p-{backend}") == f"pilot p-{backend} starting\nend\n"


def test_only_the_end_of_a_long_log_is_shown_and_says_so(runtime, now, logs, monkeypatch):
    record(runtime, now, "p-slurm", "slurm", REFS["slurm"])
    logs.mkdir(parents=True)
    (logs / "p-slurm.log").write_text("start\n" + "x" * 50 + "\nend\n")
    assert pilot_output.pilot_output(runtime, "p-slurm").endswith("\nend\n")
    monkeypatch.setattr(pilot_output, "PILOT_OUTPUT_LIMIT", 10)
    assert pilot_output.pilot_output(runtime, "p-slurm") == "(the last 10 bytes of 61)\nxxxxx\nend\n"


@pytest.mark.parametrize(("backend", "ref", "error", "message"), [
    ("slurm", "", NotFound, "pilot p1 has no log in var/pilots \\(yet\\)"),        # not taken by its backend yet
    ("slurm", "node1:1:p1", InvalidInput, "not a Slurm pilot reference: 'node1:1:p1'"),
    ("local", "12:p1", InvalidInput, "not a local pilot reference: '12:p1'"),
    ("ssh", "12:p1", InvalidInput, "not an ssh pilot reference: '12:p1'"),
    ("arc", "12:p1", InvalidInput, "not an ARC pilot reference: '12:p1'"),
    ("condor", "12:p1", InvalidInput, "no computing-element backend 'condor' \\(known: arc, local, slurm, ssh\\)"),
])
def test_what_cannot_be_asked_says_why(runtime, now, logs, backend, ref, error, message):
    record(runtime, now, "p1", backend, ref)
    with pytest.raises(error, match=message):
        pilot_output.pilot_output(runtime, "p1")


def test_an_unknown_pilot_is_not_found(runtime):
    with pytest.raises(NotFound, match="no such pilot: p2"):
        pilot_output.pilot_output(runtime, "p2")
