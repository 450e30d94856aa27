"""Warn early: `wms submit` says at once when no configured queue could
ever run a job (and `--strict` refuses the whole submission), `wms
match-queues` exits 3 when no queue fits, `wms submit -q` confines a job
to queues, and answers at once whatever the pattern."""

from __future__ import annotations

import time

import httpx

from tests.helpers import BACKTRACKING_PATTERN, EXAMPLES, patience

UNRUNNABLE = str(EXAMPLES / "unrunnable.jdl")
HELLO = str(EXAMPLES / "hello.jdl")
LONG = "LCG.CERN.ch/ce01.cern.ch/long"


def test_an_unrunnable_job_is_stored_with_a_warning(server, tokens):
    result = server("submit", UNRUNNABLE, token=tokens["roland"])
    assert result.returncode == 0
    [job_id] = result.stdout.split()
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"wms submit: warning: {UNRUNNABLE}: no configured queue could ever run this job (")
    assert "AppVersion9" in line
    [status] = server.json("status", job_id, token=tokens["roland"])
    assert status["MinorStatus"].startswith("No eligible queue")


def test_a_runnable_job_gets_no_warning(server, tokens):
    result = server("submit", HELLO, "--strict", token=tokens["roland"])
    assert result.returncode == 0 and result.stderr == ""


def test_strict_refuses_the_whole_submission_and_stores_nothing(server, tokens):
    before = server.json("jobs", token=tokens["andre"])
    result = server("submit", "--strict", HELLO, UNRUNNABLE, token=tokens["andre"])
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"wms submit: refused (--strict), nothing submitted: {UNRUNNABLE}: no configured queue")
    assert server.json("jobs", token=tokens["andre"]) == before


def test_a_request_no_level_could_ever_offer_is_warned_about(server, tokens):
    # compiler_lic: 20 in the whole cluster (config/cluster.yaml).
    result = server("submit", HELLO, "-l", "compiler_lic=50", token=tokens["roland"])
    assert result.returncode == 0
    assert "compiler_lic: 50 needed, only 20 in total" in result.stderr
    [job_id] = result.stdout.split()
    matched = server("match-queues", job_id, "--json", token=tokens["roland"])
    assert matched.returncode == 3 and matched.stdout.strip() == "[]"


def test_match_queues_exits_3_when_no_queue_fits(server, tokens):
    result = server("match-queues", UNRUNNABLE, "-v", token=tokens["roland"])
    assert result.returncode == 3
    assert "AppVersion9" in result.stdout          # -v: the reason for each queue
    assert server("match-queues", HELLO, token=tokens["roland"]).returncode == 0


def test_submit_q_confines_a_job_to_queues(server, tokens):
    [job_id] = server.ok("submit", HELLO, "-q", LONG, token=tokens["roland"]).split()
    assert server.json("match-queues", job_id, token=tokens["roland"]) == [LONG]
    assert 'qname = "LCG.CERN.ch/ce01.cern.ch/long"' in server.ok("jdl", job_id, token=tokens["roland"])
    both = server.ok("submit", HELLO, "-q", f"{LONG},LCG.CERN.ch/ce01.cern.ch/short", token=tokens["roland"])
    assert server.json("match-queues", both.strip(), token=tokens["roland"]) == [
        LONG, "LCG.CERN.ch/ce01.cern.ch/short"]
    nowhere = server("submit", HELLO, "-q", "Nowhere/*", "--strict", token=tokens["roland"])
    assert nowhere.returncode == 1 and "qname=Nowhere/*" in nowhere.stderr
    assert server("submit", HELLO, "-q", ",", token=tokens["roland"]).returncode == 2


def test_a_backtracking_queue_pattern_gets_the_usual_answer_at_once(server, tokens):
    # Matched by a backtracking regular expression, this pattern took 75 s
    # to answer and held the server meanwhile (docs/security.md).
    started = time.monotonic()
    stored = server("submit", HELLO, "-q", BACKTRACKING_PATTERN, token=tokens["roland"])
    refused = server("submit", HELLO, "-q", BACKTRACKING_PATTERN, "--strict", token=tokens["roland"])
    health = httpx.get(f"{server.url}/api/v1/health", timeout=patience(20))
    assert time.monotonic() - started < patience(20)
    assert stored.returncode == 0 and "no configured queue could ever run this job" in stored.stderr
    assert refused.returncode == 1 and f"qname={BACKTRACKING_PATTERN}" in refused.stderr
    assert health.status_code == 200
