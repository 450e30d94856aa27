"""Which limits apply to a job, and what it is charged (specs/001 "Rule
Sets", the compiler_lic example, the virtual_free examples, @staff,!roland,
{@lx_hosts}, $num_proc*5; sge_resource_quota(5) projects/pes)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.core.quotas.test_parser import RULESETS, TABLE
from wms.core.quotas.evaluate import JobFacts, QuotaRules, exempt
from wms.core.quotas.filters import Groups
from wms.core.quotas.parser import parse_rule_sets
from wms.core.scheduling import SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition

GROUPS = Groups(usersets={"staff": ["roland", "andre", "@interns"], "interns": ["ida"]},
                hostgroups={"@lx_hosts": ["durin", "carc"], "@linux_hosts": ["@lx_hosts", "gimli"]})
QUEUE = "LCG.CERN.ch/ce01.cern.ch/long"
CL = TABLE.resolve("compiler_lic")
VF = TABLE.resolve("virtual_free")
SLOTS = TABLE.resolve("slots")


def rules(text: str) -> QuotaRules:
    sets = [dataclasses.replace(s, enabled=True) for s in parse_rule_sets(text, TABLE)]
    return QuotaRules(sets, GROUPS, TABLE)


def job(user="roland", project=None, pe=None, queue=QUEUE, host="durin") -> JobFacts:
    return JobFacts(user, project, pe, queue, host)


def charges(quota: QuotaRules, facts: JobFacts, requests=None, slots=1, host_values=None, usage=None):
    requests = requests if requests is not None else {"compiler_lic": 1}
    charged = [(TABLE.resolve(name), value) for name, value in requests.items()]
    if "slots" not in requests:
        charged.append((SLOTS, None))
    found, refusal = quota.assess(facts, charged, requests, slots, (host_values or {}).get, usage)
    return {(c.label, c.scope, c.resource): (c.amount, c.capacity) for c in found}, refusal


COMPILER_LIC = rules(RULESETS)     # the specification's ruleset1 / ruleset2 example


def test_roland_always_gets_his_three_licences_even_in_a_project():
    for project in (None, "p1"):
        found, refusal = charges(COMPILER_LIC, job("roland", project))
        assert refusal is None
        assert found == {("ruleset1/1", "rqs:ruleset1/1:*", "compiler_lic"): (1.0, 3.0),
                         ("ruleset2/1", "rqs:ruleset2/1:*", "compiler_lic"): (1.0, 20.0)}


def test_other_users_get_two_in_a_project_and_one_without_and_ruleset2_caps_everyone():
    found, _ = charges(COMPILER_LIC, job("alice", "p1"))
    assert set(found) == {("ruleset1/2", "rqs:ruleset1/2:*", "compiler_lic"),
                          ("ruleset2/1", "rqs:ruleset2/1:*", "compiler_lic")}
    found, _ = charges(COMPILER_LIC, job("alice"))
    assert ("ruleset1/3", "rqs:ruleset1/3:*", "compiler_lic") in found


def test_a_full_instance_is_reported_with_usage_limit_and_user():
    _, refusal = charges(COMPILER_LIC, job("bob"), usage={("rqs:ruleset1/3:*", "compiler_lic"): 1.0})
    assert refusal.reason == 'exceeds limit "ruleset1/3" (compiler_lic=1/1 for user bob)'
    assert not refusal.lasting
    _, refusal = charges(COMPILER_LIC, job("roland"), usage={("rqs:ruleset2/1:*", "compiler_lic"): 20.0})
    assert refusal.reason == 'exceeds limit "ruleset2/1" (compiler_lic=20/20 for user roland)'


def test_a_job_that_needs_more_than_the_limit_never_fits():
    _, refusal = charges(COMPILER_LIC, job("bob"), {"compiler_lic": 2})
    assert refusal.lasting and refusal.label == "ruleset1/3"


def test_a_job_not_asking_for_the_resource_is_not_charged():
    found, refusal = charges(COMPILER_LIC, job("bob"), {})
    assert found == {} and refusal is None


def test_listed_users_share_one_limit_and_braces_give_each_their_own():
    together = rules("{\n name vf\n limit users roland, andre to virtual_free=5g\n}\n")
    each = rules("{\n name vf\n limit users {roland, andre} to virtual_free=5g\n}\n")
    need = {"virtual_free": 2 * 1024**3}
    assert list(charges(together, job("roland"), need)[0])[0][1] == "rqs:vf/1:*"
    assert list(charges(together, job("andre"), need)[0])[0][1] == "rqs:vf/1:*"
    assert list(charges(each, job("roland"), need)[0])[0][1] == "rqs:vf/1:users=roland"
    assert list(charges(each, job("andre"), need)[0])[0][1] == "rqs:vf/1:users=andre"
    assert charges(each, job("alice"), need)[0] == {}
    assert list(charges(each, job("roland"), need)[0].values()) == [(2 * 1024**3, 5 * 10**9)]  # g: 10^9 bytes, sge_types(1)


def test_an_expanded_hostgroup_is_one_instance_per_member_host():
    expanded = rules("{\n name h\n limit users * hosts {@lx_hosts} to virtual_free=10g\n}\n")
    listed = rules("{\n name h\n limit users * hosts durin to virtual_free=10g\n"
                   " limit users * hosts carc to virtual_free=10g\n}\n")
    need = {"virtual_free": 1024**3}
    assert [k[1] for k in charges(expanded, job(host="durin"), need)[0]] == ["rqs:h/1:hosts=durin"]
    assert [k[1] for k in charges(expanded, job(host="carc"), need)[0]] == ["rqs:h/1:hosts=carc"]
    assert charges(expanded, job(host="gimli"), need)[0] == {}
    # Equivalent to one rule per host: one limit of 10g on each host.
    assert [v for v in charges(listed, job(host="carc"), need)[0].values()] == [(1024**3, 10 * 10**9)]


@pytest.mark.parametrize("filter_text", ["@staff,!roland", "@staff,!roland,roland"])
def test_an_excluded_user_is_never_affected_even_if_listed_again(filter_text):
    quota = rules("{\n name s\n limit users " + filter_text + " to slots=10\n}\n")
    assert charges(quota, job("roland"), {})[0] == {}
    assert charges(quota, job("andre"), {})[0] == {("s/1", "rqs:s/1:*", "slots"): (1.0, 10.0)}
    assert charges(quota, job("ida"), {})[0] != {}        # a member of a nested user set
    assert charges(quota, job("alice"), {})[0] == {}


def test_dynamic_limit_five_slots_per_processor_on_each_linux_host():
    quota = rules("{\n name d\n limit hosts {@linux_hosts} to slots=$num_proc*5\n}\n")
    found, _ = charges(quota, job(host="durin"), {}, slots=4, host_values={"num_proc": 2})
    assert found == {("d/1", "rqs:d/1:hosts=durin", "slots"): (4.0, 10.0)}
    found, _ = charges(quota, job(host="gimli"), {}, slots=4, host_values={"num_proc": 1})
    assert found == {("d/1", "rqs:d/1:hosts=gimli", "slots"): (4.0, 5.0)}
    _, refusal = charges(quota, job(host="gimli"), {}, slots=6, host_values={"num_proc": 1})
    assert refusal.reason == 'exceeds limit "d/1" (slots=0/5 for host gimli)'
    _, refusal = charges(quota, job(host="durin"), {}, host_values={})
    assert "the host does not report $num_proc" in refusal.reason


@pytest.mark.parametrize("filter_text, without, with_p1, with_p2", [
    (None, True, True, True),
    ("*", False, True, True),
    ("!*", True, False, False),
    ("p1", False, True, False),
    ("!p1", False, False, True),
    ("{*}", False, True, True),
])
def test_project_filters(filter_text, without, with_p1, with_p2):
    projects = f"projects {filter_text} " if filter_text else ""
    quota = rules("{\n name p\n limit " + projects + "to slots=1\n}\n")
    assert [bool(charges(quota, job(project=p), {})[0]) for p in (None, "p1", "p2")] == [without, with_p1, with_p2]
    pes = rules("{\n name p\n limit " + projects.replace("projects", "pes").replace("p1", "mpi") + "to slots=1\n}\n")
    assert [bool(charges(pes, job(pe=p), {})[0]) for p in (None, "mpi", "smp")] == [without, with_p1, with_p2]


def test_expanded_projects_count_per_project():
    quota = rules("{\n name p\n limit projects {*} to slots=1\n}\n")
    assert list(charges(quota, job(project="p2"), {})[0])[0][1] == "rqs:p/1:projects=p2"


@pytest.mark.parametrize("queues, matched", [
    ("LCG.CERN.ch/*", True), ("LCG.RAL.uk/*", False), ("*/long", True), ("long", True), ("short", False),
    (QUEUE, True), ("!LCG.CERN.ch/*", False),
])
def test_queue_filters_name_site_ce_queue(queues, matched):
    quota = rules("{\n name q\n limit queues " + queues + " to slots=1\n}\n")
    assert bool(charges(quota, job(), {})[0]) is matched


def test_a_non_consumable_limit_refuses_jobs_asking_otherwise():
    quota = rules("{\n name a\n limit users roland to arch=lx24-amd64\n}\n")
    assert charges(quota, job(), {"arch": "lx24-amd64"}) == ({}, None)
    assert charges(quota, job(), {"arch": "lx*"}) == ({}, None)
    _, refusal = charges(quota, job(), {"arch": "sol-sparc64"})
    assert refusal.reason == 'exceeds limit "a/1" (arch=lx24-amd64 for user roland)' and refusal.lasting
    assert charges(quota, job("alice"), {"arch": "sol-sparc64"}) == ({}, None)


def test_only_the_first_matching_rule_of_a_set_applies_and_all_sets_apply():
    quota = rules("{\n name a\n limit users roland to slots=100\n limit users * to slots=1\n}\n"
                  "{\n name b\n limit to slots=50\n}\n")
    found, _ = charges(quota, job(), {})
    assert sorted(v[1] for v in found.values()) == [50.0, 100.0]


def test_a_disabled_set_does_not_apply_and_no_set_means_no_rules():
    assert not QuotaRules(parse_rule_sets("{\n name off\n limit to slots=0\n}\n", TABLE), GROUPS, TABLE)


def test_jobs_of_an_advance_reservation_are_exempt():
    plain = TaskQueueDefinition("roland", "lhcb_user", "lhcb", None, SchedulingRequest())
    assert exempt(dataclasses.replace(plain, reservation=193)) and not exempt(plain)


def test_unknown_host_judges_no_host_rule():
    quota = rules("{\n name h\n limit hosts durin to slots=1\n limit to slots=5\n}\n")
    assert list(charges(quota, job(host=None), {})[0])[0][0] == "h/2"
