"""The rule-set language (specs/001 grammar and examples): what reads, how
it is printed back, and every problem named with its line."""

from __future__ import annotations

import pytest

from wms.core.complexes import ComplexTable
from wms.core.quotas.model import Filter, Limit, Term
from wms.core.quotas.parser import QuotaSyntaxError, parse_rule_sets
from wms.core.quotas.render import render_sets

TABLE = ComplexTable.with_user_complexes([
    {"name": "compiler_lic", "shortcut": "cl", "type": "INT", "relop": "<=", "requestable": "YES",
     "consumable": "YES", "default": 0, "urgency": 0},
    {"name": "virtual_free", "shortcut": "vf", "type": "MEMORY", "relop": "<=", "requestable": "YES",
     "consumable": "YES", "default": "1g", "urgency": 0},
])

RULESETS = """\
{
   name ruleset1
   limit users roland to compiler_lic=3
   limit projects * to compiler_lic=2
   limit users * to compiler_lic=1
}
{
   name ruleset2
   limit users * to compiler_lic=20
}
"""


def parse(text):
    return parse_rule_sets(text, TABLE, source="rule_set.txt")


def test_the_compiler_lic_example_reads_as_two_sets_of_ordered_rules():
    one, two = parse(RULESETS)
    assert (one.name, two.name) == ("ruleset1", "ruleset2")
    assert [r.users for r in one.rules] == [Filter(("roland",)), None, Filter(("*",))]
    assert one.rules[1].projects == Filter(("*",))
    assert two.rules[0].limits == (Limit("compiler_lic", "20"),)
    assert not one.enabled and one.label(2) == "ruleset1/3"


@pytest.mark.parametrize("text, expected", [
    ("limit users roland, andre to virtual_free=5g", Filter(("roland", "andre"))),
    ("limit users {roland, andre} to virtual_free=5g", Filter(("roland", "andre"), expand=True)),
    ("limit users @staff,!roland to slots=10", Filter(("@staff",), ("roland",))),
    ("limit users @staff,!roland,roland to slots=10", Filter(("@staff", "roland"), ("roland",))),
    ("limit users { * } to slots=10", Filter(("*",), expand=True)),
])
def test_user_filters(text, expected):
    [rule_set] = parse("{\n name s\n " + text + "\n}\n")
    assert rule_set.rules[0].users == expected


def test_filters_in_any_order_are_printed_in_one_canonical_order():
    text = """{
 description "per host"
 enabled TRUE
 name lx
 limit to virtual_free=10g hosts {@lx_hosts} users * name per_host
 limit hosts {@linux_hosts} to slots=$num_proc*5
 limit pes mpi queues LCG.CERN.ch/* projects !*,p1 users !roland to slots=4,arch=lx24-amd64
}
"""
    [rule_set] = parse(text)
    assert rule_set.rules[1].limits[0].terms == (Term(5.0, "num_proc"),)
    canonical = render_sets([rule_set])
    assert canonical == """{
   name         lx
   description  "per host"
   enabled      true
   limit        name per_host users * hosts {@lx_hosts} to virtual_free=10g
   limit        hosts {@linux_hosts} to slots=$num_proc*5
   limit        users !roland projects p1,!* pes mpi queues LCG.CERN.ch/* to slots=4,arch=lx24-amd64
}
"""
    assert parse(canonical) == [rule_set]


def test_shortcuts_become_names_and_a_set_without_rules_is_accepted():
    [with_rule, empty] = parse("{\nname a\nlimit to cl=1\n}\n{ name rule_set_2\nenabled true\n"
                               "description \"rule set 2\" }\n")
    assert with_rule.rules[0].limits == (Limit("compiler_lic", "1"),)
    assert (empty.name, empty.enabled, empty.description, empty.rules) == ("rule_set_2", True, "rule set 2", ())


def test_backslash_continues_a_line_and_hash_starts_a_comment():
    [rule_set] = parse("{\n name s # the set\n limit users roland \\\n   to slots=2\n}\n")
    assert rule_set.rules[0].limits == (Limit("slots", "2"),)


def test_dynamic_limit_sums_weighted_terms():
    [rule_set] = parse("{\n name d\n limit hosts {*} to slots=$num_proc*2+1-$num_proc\n}\n")
    assert rule_set.rules[0].limits[0].terms == (Term(2.0, "num_proc"), Term(1.0), Term(1.0, "num_proc", -1))


@pytest.mark.parametrize("text, line, message", [
    ("name x\n", 1, "expected '{' to begin a resource quota set, got 'name'"),
    ("{\n enabled true\n}\n", 1, "the resource quota set has no name"),
    ("{\n name 1abc\n}\n", 2, "invalid resource quota set name '1abc'"),
    ("{\n name a\n name b\n}\n", 3, "'name' is given twice in one resource quota set"),
    ("{\n name a\n enabled yes\n}\n", 3, "enabled must be true or false, got 'yes'"),
    ("{\n name a\n colour red\n}\n", 3, "unknown attribute 'colour'"),
    ("{\n name a\n description \"open\n}\n", 3, "description must be one quoted string"),
    ("{\n name a\n limit users roland\n}\n", 3, "a rule needs 'to' and its limits"),
    ("{\n name a\n limit users to slots=1\n}\n", 3, "'users' needs a value"),
    ("{\n name a\n limit users a users b to slots=1\n}\n", 3, "'users' is given twice in one rule"),
    ("{\n name a\n limit user roland to slots=1\n}\n", 3, "unexpected 'user' in a rule"),
    ("{\n name a\n limit users roland andre to slots=1\n}\n", 3, "expected ',' between 'roland' and 'andre'"),
    ("{\n name a\n limit users {roland to slots=1\n}\n", 3, "unbalanced braces in the users filter"),
    ("{\n name a\n limit users roland,,andre to slots=1\n}\n", 3, "empty name in the users filter"),
    ("{\n name a\n limit projects @p to slots=1\n}\n", 3, "groups may be named only in users and hosts filters"),
    ("{\n name a\n limit to slots\n}\n", 3, "expected resource=value after 'to', got 'slots'"),
    ("{\n name a\n limit to licences=1\n}\n", 3, "unknown resource 'licences' in a limit"),
    ("{\n name a\n limit to slots=1,s=2\n}\n", 3, "'slots' is limited twice in one rule"),
    ("{\n name a\n limit to slots=many\n}\n", 3, "limit slots=many: attribute \"slots\" is not"),
    ("{\n name a\n limit to slots=$num_proc*5\n}\n", 3, "needs an expanded host filter (hosts {..})"),
    ("{\n name a\n limit hosts durin to slots=$num_proc*5\n}\n", 3, "needs an expanded host filter"),
    ("{\n name a\n limit hosts {*} to slots=$num_proc*x\n}\n", 3, "invalid dynamic limit slots=$num_proc*x"),
    ("{\n name a\n limit hosts {*} to slots=$cpus*5\n}\n", 3, "names an unknown complex 'cpus'"),
    ("{\n name a\n limit hosts {*} to slots=$arch*5\n}\n", 3, "$arch is not INT or DOUBLE"),
    ("{\n name a\n limit hosts {*} to arch=$num_proc\n}\n", 3, "arch is not numeric"),
    ("{\n name a\n limit name r to slots=1\n limit name r to slots=2\n}\n", 4, "rule name 'r' is used twice"),
    ("{\n name a\n limit name 3 to slots=1\n}\n", 3, "invalid rule name '3'"),
    ("{\n name a\n}\n{\n name a\n}\n", 4, "resource quota set 'a' is defined twice"),
    ("{\n name a\n limit to slots=1\n", 1, "missing '}' at the end of the resource quota set 'a'"),
])
def test_grammar_errors_name_the_line_and_the_problem(text, line, message):
    with pytest.raises(QuotaSyntaxError) as caught:
        parse(text)
    assert caught.value.where == f"rule_set.txt:{line}"
    assert message in caught.value.message
