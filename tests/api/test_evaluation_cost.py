"""What a user's expression may cost the service (docs/security.md,
"Evaluation cost"), against a real `wms server`:

* a pattern that can backtrack catastrophically is refused at submission,
  at its line and column, in milliseconds (the issue's reproduction 2);
* an expression that slips past the pattern check but is slow is refused
  by the evaluation budget, with its figure;
* at match time, an expression that raises on a pilot (reproduction 3) or
  runs over its budget holds its task queue's jobs for the system, with
  the reason in `wms why`, the job's status and its history; it is not
  evaluated again, and the server logs it once.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.helpers import eventually
from tests.servers import Tokens, running_server

USERS = {"roland": ("roland", "lhcb_user", "lhcb", "user")}
QUEUE = {"site": "LCG.CERN.ch", "ce": "ce01.cern.ch", "queue": "long", "host": "wn-cost-1", "slots": 1}
# A pattern PCRE matches in linear time would need no budget; this one tries
# every way of placing ten .* (about 0.1 s of CPU a call, at PCRE's match
# limit), and passes the backtracking check: its cost is a polynomial.
SLOW_CALL = 'regexp("^.*a.*a.*a.*a.*a.*a.*a.*a.*a.*a.*[cd]$", "' + "a" * 100 + 'b")'


def jdl(requirements: str) -> str:
    return f'[\n  Executable = "/bin/true";\n  Requirements = {requirements};\n]'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("cost"), tokens=USERS) as handle:
        yield handle


@pytest.fixture(scope="module")
def tokens(server) -> Tokens:
    return Tokens(server)


def submit(server, tokens, text: str):
    with server.api(tokens["roland"]) as api:
        return api.post("/jobs", json={"jdls": [{"source": "cost.jdl", "text": text}]})


def request_job(server, tokens, pilot_id: str):
    with server.api(tokens[pilot_id]) as api:
        answer = api.post("/matcher/request-job", json={**QUEUE, "pilot_id": pilot_id})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_backtracking_pattern_repeated_twenty_times_is_refused_at_once_at_its_place(server, tokens):
    call = 'regexp("^(a|a)*$", "' + "a" * 60 + 'b")'
    text = jdl("member(true, {" + ", ".join([call] * 20) + "}) || other.NoSuchAttr == 1")
    started = time.monotonic()
    answer = submit(server, tokens, text)
    assert time.monotonic() - started < 2       # it took 29 s; the check itself takes about a millisecond
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == (
        "cost.jdl:3:39: regexp(): pattern '^(a|a)*$' refused at its character 3: alternatives that can start "
        "with the same character inside a repeated group can backtrack catastrophically (as in (a|a)*) "
        '(docs/security.md, "Evaluation cost")')


@pytest.mark.parametrize("pattern, why", [
    ("(a+)+b", "a quantifier inside a repeated group"),
    (r"(x)\\1", "back-references are not allowed"),
])
def test_nested_quantifiers_and_back_references_are_refused(server, tokens, pattern, why):
    answer = submit(server, tokens, jdl(f'regexp("{pattern}", other.Platform)'))
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"].startswith("cost.jdl:3:25: regexp(): pattern ")
    assert why in answer.json()["detail"]


def test_a_computed_pattern_is_refused(server, tokens):
    answer = submit(server, tokens, jdl('regexp(strcat("^", other.Platform), "x86_64")'))
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == ("cost.jdl:3:25: regexp(): the pattern must be a string literal "
                                       "(a computed pattern cannot be checked before it runs)")


def test_a_slow_expression_that_passes_the_pattern_check_is_refused_by_the_budget(server, tokens):
    answer = submit(server, tokens, jdl(f"{SLOW_CALL} || other.NoSuchAttr == 1"))
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("cost.jdl: Requirements take "), detail
    assert detail.endswith(" ms to evaluate against one queue; the limit is 5.0 ms (limits.evaluation_ms)")
    assert float(detail.split("take ")[1].split(" ms")[0]) > 5


def held_lines(server, task_queue: str) -> list[str]:
    """The log lines saying ``task_queue``'s jobs were held (the server is the module's: other tests hold theirs)."""
    return [line for line in server.log.read_text().splitlines()
            if "held by the system" in line and f" task queue {task_queue}: " in line]


def test_an_expression_that_raises_on_a_pilot_holds_its_jobs_once_and_is_not_evaluated_again(server, tokens):
    # true on every queue's ad (no FreeSlots there); random(0) raises on a one-slot pilot
    ids = submit(server, tokens, jdl("other.FreeSlots is undefined || random(other.FreeSlots - 1) >= 0")
                 .replace("Executable", "Parameters = 2; Executable")).json()["job_ids"]
    first = request_job(server, tokens, "cost-p1")
    assert first["match"] is False
    assert "Requirements expression cannot be evaluated on a pilot of LCG.CERN.ch/ce01.cern.ch/long" in first["reason"]
    assert "this holds every waiting job of task queue" in first["reason"]

    statuses = server.json("status", *map(str, ids), token=tokens["roland"])
    assert [s["Status"] for s in statuses] == ["Held", "Held"]
    assert all(s["MinorStatus"].startswith("Held by the system: Requirements expression cannot be evaluated")
               for s in statuses)
    why = server.wms("why", str(ids[0]), token=tokens["roland"])
    assert why.returncode == 0, why.stderr
    assert f"job {ids[0]} is Held, it is not matched: Held by the system" in why.stdout
    history = server.ok("logging-info", str(ids[0]), token=tokens["roland"])
    assert "Held" in history and "Matcher" in history

    for n in range(3):      # drawn no more: another answer, and no new log line about it
        again = request_job(server, tokens, f"cost-p{n + 2}")
        assert "cannot be evaluated" not in again.get("reason", ""), again
    task_queue = re.search(r"task queue (\d+)", first["reason"]).group(1)
    eventually(lambda: held_lines(server, task_queue))
    assert len(held_lines(server, task_queue)) == 1
    assert not [line for line in server.log.read_text().splitlines() if " ERROR " in line or '"ERROR"' in line]

    kill = server.wms("kill", str(ids[1]), token=tokens["roland"])
    assert kill.returncode == 0, kill.stderr
    assert server.json("status", str(ids[1]), token=tokens["roland"])[0]["Status"] == "Killed"


def test_an_expression_over_its_budget_on_a_pilot_holds_its_jobs_with_the_figure(server, tokens):
    # cheap on the queues' ads (FreeSlots undefined there), slow on a pilot
    [job_id] = submit(server, tokens, jdl(f"other.FreeSlots is undefined || {SLOW_CALL}")).json()["job_ids"]
    answer = request_job(server, tokens, "cost-budget-1")
    assert answer["match"] is False
    status = server.json("status", str(job_id), token=tokens["roland"])[0]
    assert status["Status"] == "Held"
    minor = status["MinorStatus"]
    assert minor.startswith("Held by the system: Requirements take "), minor
    assert " ms to evaluate against one queue; the limit is 5.0 ms (limits.evaluation_ms) on a pilot of " in minor
    with server.api(tokens["roland"]) as api:
        history = api.get(f"/jobs/{job_id}/history").json()
    assert [h["Status"] for h in history][-1] == "Held"
    assert json.dumps(history).count("Held by the system") == 1
