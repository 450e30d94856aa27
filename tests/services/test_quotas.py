"""Resource quota sets in the Matcher, on SQLite, PostgreSQL and MariaDB:
stored and shared, enforced in the claim, returned when jobs end, are
killed or lose their lease, and never exceeded with many Matchers."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from tests.helpers import ADMIN, ALICE, OPERATOR, as_pilot, ROLAND, default_config, run_concurrently
from tests.services.test_matcher import HELLO, pilot, status, submit, usage
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases
from wms.services import quotas as quotas_service
from wms.core.scheduling import SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition
from wms.services.runtime import Runtime

pytestmark = pytest.mark.databases

LIC = '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ compiler_lic = 1; ]; ]'
RULESETS = """
{
   name ruleset1
   enabled true
   limit users roland to slots=3
   limit projects * to slots=2
   limit users * to slots=1
}
{
   name ruleset2
   enabled true
   limit users * to compiler_lic=1
}
"""


@pytest.fixture(autouse=True)
def no_sync_delay(monkeypatch):
    monkeypatch.setattr(quotas_service, "SYNC_INTERVAL", 0.0)


def quota_usage(runtime):
    return {k: v for k, v in usage(runtime).items() if k[0].startswith("rqs:")}


def test_roland_gets_his_three_slots_then_the_quota_refuses(runtime, now):
    quotas_service.modify(runtime, ADMIN, RULESETS, now)
    submit(runtime, now, *[HELLO] * 5)
    got = [matcher.request_job(runtime, pilot(f"p{i}"), now) for i in range(4)]
    assert [r.job is not None for r in got] == [True, True, True, False]
    assert 'exceeds limit "ruleset1/1" (slots=3/3 for user roland)' in got[3].reason
    assert quota_usage(runtime) == {("rqs:ruleset1/1:*", "slots"): 3.0}
    leases.pilot_status(runtime, as_pilot("p0"), got[0].job["JobID"], "p0", "Done", "", 0, now)
    assert quota_usage(runtime) == {("rqs:ruleset1/1:*", "slots"): 2.0}
    assert matcher.request_job(runtime, pilot("p9"), now).job is not None


def test_other_users_get_one_slot_and_one_licence_for_all(runtime, now):
    quotas_service.modify(runtime, ADMIN, RULESETS, now)
    submit(runtime, now, HELLO, HELLO, identity=ALICE)
    assert matcher.request_job(runtime, pilot("p1"), now).job is not None
    result = matcher.request_job(runtime, pilot("p2"), now)
    assert result.job is None and 'exceeds limit "ruleset1/3" (slots=1/1 for user alice)' in result.reason


def test_the_licence_rule_set_applies_too_and_kill_returns_it(runtime, now):
    quotas_service.modify(runtime, ADMIN, RULESETS, now)
    submit(runtime, now, LIC, LIC)
    first = matcher.request_job(runtime, pilot("p1"), now)
    second = matcher.request_job(runtime, pilot("p2"), now)
    assert first.job is not None and second.job is None
    assert 'exceeds limit "ruleset2/1" (compiler_lic=1/1 for user roland)' in second.reason
    jobs_service.kill_jobs(runtime, ADMIN, [first.job["JobID"]], now)
    assert quota_usage(runtime) == {}
    assert matcher.request_job(runtime, pilot("p3"), now).job is not None


def test_an_expired_lease_returns_the_quota(runtime, now):
    quotas_service.modify(runtime, ADMIN, RULESETS, now)
    [job_id] = submit(runtime, now, LIC)
    assert matcher.request_job(runtime, pilot("p1"), now).job["JobID"] == job_id
    later = now + timedelta(seconds=runtime.config.settings.match_lease + 1)
    assert leases.expire_leases(runtime, later) == 1
    assert quota_usage(runtime) == {} and status(runtime, job_id)["Status"] == "Waiting"


def test_per_host_dynamic_limit(runtime, now):
    quotas_service.add(runtime, ADMIN, "{\n name per_host\n enabled true\n"
                       " limit hosts {*} to slots=$num_proc*1\n}\n", now)
    submit(runtime, now, *[HELLO] * 4)
    small = {"num_proc": 1, "arch": "lx-amd64"}
    assert matcher.request_job(runtime, pilot("a1", host="wn1", load=small), now).job is not None
    refused = matcher.request_job(runtime, pilot("a2", host="wn1", load=small), now)
    assert 'exceeds limit "per_host/1" (slots=1/1 for host wn1)' in refused.reason
    assert matcher.request_job(runtime, pilot("b1", host="wn2", load=small), now).job is not None
    assert quota_usage(runtime) == {("rqs:per_host/1:hosts=wn1", "slots"): 1.0,
                                    ("rqs:per_host/1:hosts=wn2", "slots"): 1.0}


def test_a_disabled_set_costs_nothing_and_limits_nothing(runtime, now):
    quotas_service.add(runtime, ADMIN, "{\n name off\n limit to slots=0\n}\n", now)
    assert quotas_service.for_request(runtime) is None
    submit(runtime, now, HELLO)
    assert matcher.request_job(runtime, pilot(), now).job is not None
    assert quota_usage(runtime) == {}


def test_jobs_in_an_advance_reservation_are_neither_limited_nor_counted(runtime, now):
    quotas_service.add(runtime, ADMIN, "{\n name none\n enabled true\n limit to slots=0\n}\n", now)
    from wms.core.match.quotas import QUOTA_LAYER
    from wms.core.match.context import TaskQueueView
    ctx = matcher.match_context(runtime, pilot(), now)
    definition = TaskQueueDefinition("roland", "lhcb_user", "lhcb", None, SchedulingRequest(), reservation=193)
    view = TaskQueueView(tq_id=1, priority=1, definition=definition, hard={}, soft={},
                         charged=((runtime.read_stored_complexes().resolve("slots"), None),))
    assert QUOTA_LAYER.check(ctx, view).allowed and matcher.match_debits(ctx, view)[-1].scope.startswith("queue:")
    plain = dataclasses.replace(view, tq_id=2, definition=dataclasses.replace(definition, reservation=None))
    assert not QUOTA_LAYER.check(ctx, plain).allowed


def test_rule_sets_are_stored_in_canonical_form_and_every_process_sees_changes(runtime, engine, now):
    other = Runtime.create(default_config(), engine)
    assert quotas_service.names(other) == ["ruleset1", "ruleset2"]     # config/rqs/example.rqs
    quotas_service.add(runtime, ADMIN, "{\nname a\nenabled true\nlimit to slots=2 users {roland}\n}\n", now)
    assert quotas_service.show(other, ["a"]) == ("{\n   name         a\n   enabled      true\n"
                                          "   limit        users {roland} to slots=2\n}\n")
    assert quotas_service.for_request(other) is not None
    quotas_service.delete(runtime, OPERATOR, [], now)
    assert quotas_service.for_request(other) is None


def test_only_operators_and_managers_change_rule_sets(runtime, now):
    with pytest.raises(Forbidden):
        quotas_service.add(runtime, ROLAND, "{\n name a\n}\n", now)
    assert quotas_service.names(runtime) == ["ruleset1", "ruleset2"]


def test_refusals_store_nothing(runtime, now):
    quotas_service.add(runtime, ADMIN, "{\n name a\n}\n", now)
    with pytest.raises(Conflict, match='resource quota set "a" already exists'):
        quotas_service.add(runtime, ADMIN, "{\n name b\n}\n{\n name a\n}\n", now)
    with pytest.raises(InvalidInput, match='resource quota set name "template" is not valid'):
        quotas_service.add(runtime, ADMIN, quotas_service.template(None), now)
    with pytest.raises(InvalidInput, match="rule set file:2: unknown attribute"):
        quotas_service.add(runtime, ADMIN, "{\n nam c\n}\n", now)
    with pytest.raises(NotFound, match='denied: resource quota set "b" does not exist'):
        quotas_service.delete(runtime, ADMIN, ["a", "b"], now)
    assert quotas_service.names(runtime) == ["ruleset1", "ruleset2", "a"]


def test_initial_rule_sets_come_from_the_configuration_directory(tmp_path, engine, now):
    import shutil
    config_dir = tmp_path / "config"
    shutil.copytree(default_config().directory, config_dir)
    (config_dir / "rqs").mkdir(exist_ok=True)
    (config_dir / "rqs" / "site.rqs").write_text("{\n name from_file\n enabled true\n limit to slots=7\n}\n")
    from wms.config import load_config
    runtime = Runtime.create(load_config(config_dir), engine)
    assert "from_file" in quotas_service.names(runtime)
    (config_dir / "rqs" / "bad.rqs").write_text("{\n name x\n limit to slots=\n}\n")
    runtime = Runtime.create(load_config(config_dir), engine)
    from wms.core.errors import ConfigError
    with pytest.raises(ConfigError, match=r"bad.rqs:3: expected resource=value"):
        quotas_service.initial_rule_sets(runtime)


def test_many_matchers_at_once_never_exceed_a_quota(runtime, now):
    quotas_service.add(runtime, ADMIN, "{\n name cap\n enabled true\n limit users roland to slots=3\n}\n"
                       "{\n name lic\n enabled true\n limit users {*} to compiler_lic=1\n}\n", now)
    submit(runtime, now, *[HELLO] * 6, *[LIC] * 4)

    def work(n):
        return [matcher.request_job(runtime, pilot(f"p{n}-{k}", host=f"wn{n}"), now).job for k in range(3)]

    results, errors = run_concurrently(work, 8)
    assert errors == []
    jobs = [j for batch in results for j in batch if j]
    assert len(jobs) == 3 and len({j["JobID"] for j in jobs}) == 3
    assert quota_usage(runtime)[("rqs:cap/1:*", "slots")] == 3.0
    assert quota_usage(runtime).get(("rqs:lic/1:users=roland", "compiler_lic"), 0.0) <= 1.0


def test_new_rule_instances_on_many_hosts_at_once_are_never_refused_as_full(runtime, now):
    """Each new host opens a new instance row; concurrent claims must not see it as missing (= full)."""
    quotas_service.add(runtime, ADMIN, "{\n name hosts\n enabled true\n limit hosts {*} to slots=100\n}\n"
                       "{\n name users\n enabled true\n limit users {*} to slots=100\n}\n", now)
    submit(runtime, now, *[HELLO] * 8)

    def work(n):
        return [matcher.request_job(runtime, pilot(f"h{n}-{k}", host=f"new{n}-{k}"), now) for k in range(2)]

    results, errors = run_concurrently(work, 8)
    assert errors == []
    reasons = [r.reason for batch in results for r in batch if r.job is None]
    assert not [r for r in reasons if "exceeds limit" in r]
    matched = sum(1 for batch in results for r in batch if r.job is not None)
    assert matched == 4                      # the local queue's 4 slots, not a quota
    assert sum(v for (scope, _), v in quota_usage(runtime).items() if scope.startswith("rqs:hosts/")) == 4.0


def test_a_claim_rolled_back_for_a_full_queue_does_not_lose_a_new_instance(runtime, now):
    quotas_service.add(runtime, ADMIN, "{\n name each\n enabled true\n limit users {*} to slots=100\n}\n", now)
    alice = submit(runtime, now, *[HELLO] * 4, identity=ALICE)
    assert all(matcher.request_job(runtime, pilot(f"a{i}"), now).job for i in range(4))
    submit(runtime, now, HELLO)                                    # roland's: his instance is new
    full = matcher.request_job(runtime, pilot("r1"), now)
    assert full.job is None and "queue slots" in full.reason       # rolled back on the queue level
    jobs_service.kill_jobs(runtime, ADMIN, [alice[0]], now)
    assert matcher.request_job(runtime, pilot("r2"), now).job is not None
    assert quota_usage(runtime)[("rqs:each/1:users=roland", "slots")] == 1.0
