"""complex(5) and SPEC 000: definitions (examples.md 1.1), relops (1.2, 1.3),
consumables (1.4, SPEC 000 E1/E2), overriding (1.5, SPEC 000 section 3),
FORCED (1.6), as tables with exact results and messages."""

from __future__ import annotations

import math

import pytest

from wms.core.complexes import (
    BUILTIN_COMPLEXES,
    RENDER_FOOTER,
    Complex,
    ComplexDefinitionError,
    ComplexTable,
    Consumable,
    Relop,
    Requestable,
    ValueType,
    consumable_amount,
    fits,
    forced_missing,
    parse_value,
    satisfies,
    validate_requests,
)
from wms.core.errors import InvalidInput
from wms.core.offers import Offer, Shortfall, check_hierarchy, effective_offer
from wms.core.quantities import parse_memory

COLUMNS = ("name", "shortcut", "type", "relop", "requestable", "consumable", "default", "urgency")
G = 1024**3


def entry(line: str) -> dict[str, str]:
    return dict(zip(COLUMNS, line.split()))


def table_with(*lines: str) -> ComplexTable:
    return ComplexTable.with_user_complexes([entry(line) for line in lines])


BASE = table_with("compiler_lic cl INT <= YES YES 0 100")


# -- the built-in table ---------------------------------------------------------------
def test_builtin_table_has_the_52_default_entries():
    table = ComplexTable.builtin()
    assert len(BUILTIN_COMPLEXES) == 52
    assert len(table) == 52
    assert table.names == sorted(table.names)
    assert all(cx.builtin for cx in table)
    slots = table.resolve("s")
    assert (slots.name, slots.type, slots.relop, slots.requestable, slots.consumable, slots.default, slots.urgency) == (
        "slots", ValueType.INT, Relop.LE, Requestable.YES, Consumable.YES, "1", 1000)
    assert [cx.name for cx in table if cx.is_consumable] == ["slots"]
    assert table.get("m_thread").shortcut == "thread"
    assert table.get("h_rt").default == "0:0:0"


@pytest.mark.parametrize(
    "key, name",
    [("a", "arch"), ("arch", "arch"), ("mf", "mem_free"), ("h", "hostname"), ("p", "num_proc"),
     ("tmp", "tmpdir"), ("cpu", "cpu"), ("cl", "compiler_lic"), ("ARCH", None), ("nope", None)],
)
def test_get_by_name_or_shortcut(key, name):
    found = BASE.get(key)
    assert (found.name if found else None) == name


def test_resolve_unknown():
    with pytest.raises(InvalidInput) as caught:
        BASE.resolve("nope")
    assert str(caught.value) == "unknown resource 'nope'"


# -- 1.1 definitions ------------------------------------------------------------------
DEFINITIONS = [
    ("C1", "compiler_lic cl INT <= YES YES 0 0", []),
    ("C2", "lic_str ls2 STRING <= YES NO NONE 0", ['Complex "lic_str" has an invalid relational operator']),
    ("C3", "os os STRING != YES NO NONE 0", []),
    ("C4", "mystr ms STRING == YES YES NONE 0", ['Complex "mystr" of type "STRING" cannot be a consumable']),
    ("C5", "lic l INT >= YES YES 0 0", ['Consumable "lic" can have only <= as an relational operator']),
    ("C6", "lic l INT <= NO YES 0 0", ['Consumable "lic" needs a default value because it is not requestable.']),
    ("C7", "lic l INT <= NO YES 2 0", []),
    ("C8", "lic l INT <= FORCED YES 2 0", ['Consumable "lic" cannot have a default value because it is forced.']),
    ("C9", "fixed fx INT <= YES NO 5 0", ['Complex "fixed" cannot have a default value']),
    ("C10", "label lb STRING == YES NO abc 0", ['Complex "label" cannot have a default value']),
    ("C11", "excl ex BOOL EXCL YES NO 0 0", ['Exclusive complex "excl" must be a consumable']),
    ("C12", "excl ex BOOL EXCL YES YES 0 1000", []),
    ("C13", "excl2 ex2 INT EXCL YES YES 0 0", ['Complex "excl2" must be BOOL to use EXCL as relational operator']),
    ("C14", "flag fl BOOL == YES YES 0 0", ['Exclusive complex "flag" must have EXCL as relational operator',
                                           'Consumable "flag" can have only <= as an relational operator']),
    ("C15", "tmpdir tmp RESTRING == YES NO NONE 0", ['Complex attribute "tmpdir" is not requestable']),
    ("C16", "arch a INT == YES NO 0 0", ['The type of the complex "arch" cannot be changed due to its built in status']),
    ("C17", "arch a CSTRING == YES NO NONE 0", []),
    ("C18", "foo s INT <= YES NO 0 0", ["complex with name foo or shortcut s already exists"]),
    ("C19", "lic l INT <= YES YES 0 abc", ['The following error occoured for complex "lic", while parsing the urgency '
                                           "value: \"'abc' is not a double value: no number found\""]),
    ("C20", "lic l INT <= NO YES 1x 0", ['Complex "lic"\'s default value should be of type "INT"']),
    # more of SPEC 000 section 2 and of Grid Engine's checks
    ("bool-relop", "b b BOOL <= YES NO 0 0", ['Complex "b" has an invalid relational operator']),
    ("bool-default", "b b BOOL == YES NO TRUE 0", ['Complex "b" cannot have a default value']),
    ("host-consumable", "hh hh HOST == YES JOB NONE 0", ['Complex "hh" of type "HOST" cannot be a consumable']),
    ("forced-ok", "lic l INT <= FORCED YES 0 0", []),
    ("job-consumable", "lic l MEMORY <= YES JOB 1G 0", []),
    ("consumable-yes-default", "lic l INT <= YES YES 1x 0", ['Complex "lic"\'s default value should be of type "INT"']),
    ("time-default", "wall w TIME <= YES NO 0:0:1 0", ['Complex "wall" cannot have a default value']),
    ("builtin-host", "hostname h STRING == YES NO NONE 0",
     ['The type of the complex "hostname" cannot be changed due to its built in status']),
    ("builtin-restring", "tmpdir tmp STRING == NO NO NONE 0", []),
    ("shortcut-of-name", "mf x INT <= YES NO 0 0", ["complex with name mf or shortcut x already exists"]),
]


@pytest.mark.parametrize("case, line, problems", DEFINITIONS, ids=[row[0] for row in DEFINITIONS])
def test_definition_rules(case, line, problems):
    if not problems:
        table = table_with(line)
        assert table.get(line.split()[0]) is not None
        return
    with pytest.raises(ComplexDefinitionError) as caught:
        table_with(line)
    assert [message for _, message in caught.value.problems] == problems
    assert {where for where, _ in caught.value.problems} == {"complexes[0]"}
    assert str(caught.value) == "complexes[0]: " + "; ".join(problems)


def test_c1_nothing_debited_when_not_requested():
    cx = table_with(DEFINITIONS[0][1]).resolve("cl")
    assert consumable_amount(cx, None, 4) == 0


def test_c7_default_debited_per_slot():
    cx = table_with("lic l INT <= NO YES 2 0").resolve("lic")
    assert consumable_amount(cx, None, 3) == 6


def test_c17_builtin_keeps_builtin_status():
    arch = table_with("arch a CSTRING == YES NO NONE 0").resolve("arch")
    assert arch.type is ValueType.CSTRING and arch.builtin
    assert satisfies(arch, "LX*", "lx-amd64")


def test_yaml_style_entries():
    table = ComplexTable.with_user_complexes([
        {"name": "compiler_lic", "shortcut": "cl", "type": "INT", "relop": "<=", "requestable": True,
         "consumable": True, "default": 0, "urgency": 0},
        {"name": "scratch", "shortcut": "scr", "type": "memory", "relop": "<=", "requestable": "y",
         "consumable": "j", "default": "1G", "urgency": 0.5},
    ])
    lic, scratch = table.resolve("cl"), table.resolve("scr")
    assert (lic.requestable, lic.consumable, lic.default, lic.urgency) == (Requestable.YES, Consumable.YES, "0", 0)
    assert (scratch.type, scratch.consumable, scratch.urgency) == (ValueType.MEMORY, Consumable.JOB, 0.5)
    assert len(table) == 54


def test_all_problems_of_all_entries_are_reported():
    with pytest.raises(ComplexDefinitionError) as caught:
        ComplexTable.with_user_complexes([
            entry("good g INT <= YES YES 0 0"),
            entry("flag fl BOOL == YES YES 0 0"),
            {"name": "x", "shortcut": "x", "type": "FLOAT", "relop": "~", "requestable": "maybe",
             "consumable": "NO", "default": 0, "urgency": 0},
            {"name": "y", "shortcut": "y"},
            entry("good g2 INT <= YES NO 0 0"),
        ])
    assert caught.value.problems == [
        ("complexes[1]", 'Exclusive complex "flag" must have EXCL as relational operator'),
        ("complexes[1]", 'Consumable "flag" can have only <= as an relational operator'),
        ("complexes[2]", 'unknown complex attribute type "FLOAT"'),
        ("complexes[2]", 'unknown relational operator "~" (use ==, !=, <, <=, >, >= or EXCL)'),
        ("complexes[2]", 'unknown requestable value "maybe" (use YES, NO or FORCED)'),
        ("complexes[3]", "missing column(s): type, relop, requestable, consumable, default, urgency"),
        ("complexes[4]", "complex with name good or shortcut g2 already exists"),
    ]
    assert str(caught.value).startswith("complexes[1]: Exclusive complex")


def test_a_user_entry_twice_is_a_duplicate():
    with pytest.raises(ComplexDefinitionError) as caught:
        table_with("arch a CSTRING == YES NO NONE 0", "arch a STRING == YES NO NONE 0")
    assert caught.value.problems == [("complexes[1]", "complex with name arch or shortcut a already exists")]


@pytest.mark.parametrize("bad_name", ["a b", "x/y", "q@h", "", "l:1"])
def test_names_are_object_names(bad_name):
    with pytest.raises(ComplexDefinitionError):
        ComplexTable.with_user_complexes([{"name": bad_name, "shortcut": "zz", "type": "INT", "relop": "<=",
                                           "requestable": "YES", "consumable": "NO", "default": 0, "urgency": 0}])


# -- value checks after 1.1 -----------------------------------------------------------
VALUE_CHECKS = [
    ("slots", "infinity", 'slots: attribute "slots" is consumable and cannot be infinity'),
    ("h_vmem", "infinity", math.inf),
    ("compiler_lic", "-1", 'compiler_lic: attribute "compiler_lic" is consumable but has a negative value'),
    ("h_rt", "1:00:00", 3600),
    ("num_proc", "abc", "num_proc: attribute \"num_proc\" is not an integer value ('abc': no number found)"),
    # more, per type
    ("h_vmem", "2G", 2 * G),
    ("h_vmem", "abc", "h_vmem: attribute \"h_vmem\" is not a memory value ('abc': no number found)"),
    ("cpu", "50", 50.0),
    ("num_proc", 4, 4),
    ("num_proc", "2.5", "num_proc: attribute \"num_proc\" is not an integer value ('2.5': it has a fractional part)"),
    ("display_win_gui", "TRUE", True),
    ("display_win_gui", "0", False),
    ("display_win_gui", "maybe", "display_win_gui: attribute \"display_win_gui\" is not a boolean value "
                                 "('maybe': use TRUE, FALSE, 1 or 0)"),
    ("arch", "lx-amd64", "lx-amd64"),
    ("arch", 5, "5"),
    ("compiler_lic", 0, 0),
]


@pytest.mark.parametrize("name, raw, expected", VALUE_CHECKS)
def test_value_checks(name, raw, expected):
    cx = BASE.resolve(name)
    if isinstance(expected, str) and ": " in expected and expected.startswith(name + ":"):
        with pytest.raises(InvalidInput) as caught:
            parse_value(cx, raw)
        assert str(caught.value) == expected
    else:
        value = parse_value(cx, raw)
        assert value == expected
        if isinstance(expected, (bool, str)) or cx.type is ValueType.INT:
            assert type(value) is type(expected)
        else:  # MEMORY, TIME and DOUBLE values are floats
            assert type(value) is float


# -- 1.2 relational operators: the request is the left operand ------------------------
RELOPS = [
    ("h_rt", "1:00:00", "2:00:00", True),
    ("h_rt", "3:00:00", "2:00:00", False),
    ("h_rt", "1:00:00", "INFINITY", True),
    ("mem_free", "2G", "3.5G", True),
    ("mem_used", "1G", "0.5G", True),
    ("num_proc", "4", "4", True),
    ("num_proc", "4", "8", False),
    ("cpu", "50", "20", True),
    ("arch", "lx*-amd64|sol*", "lx24-amd64", True),
    ("arch", "lx*-amd64|sol*", "darwin-x86", False),
    ("h_vmem", "2G", "4G", True),  # the brief's own example
    ("h_vmem", 2 * G, 4 * G, True),  # parsed values work too
    ("h_vmem", "4G", "2G", False),
    ("hostname", "DURIN", "durin", True),
    ("hostname", "*.cern.ch", "LXB01.CERN.CH", True),
    ("display_win_gui", True, "TRUE", True),
    ("display_win_gui", "true", "0", False),
]


@pytest.mark.parametrize("name, requested, offered, expected", RELOPS)
def test_relops(name, requested, offered, expected):
    assert satisfies(BASE.resolve(name), requested, offered) is expected


def test_string_not_equal_relop():
    table = table_with("os os STRING != YES NO NONE 0")
    os_ = table.resolve("os")
    assert satisfies(os_, "rh*", "sles15") is True
    assert satisfies(os_, "rh*", "rh9") is False
    # a malformed pattern counts as "not equal" (Grid Engine's matcher returns -1)
    assert satisfies(os_, "rh*|", "rh9") is True
    assert satisfies(BASE.resolve("arch"), "rh*|", "rh9") is False


@pytest.mark.parametrize(
    "relop, requested, offered, expected",
    [("==", 1, 1, True), ("!=", 1, 1, False), ("<", 1, 1, False), ("<", 1, 2, True), (">", 2, 1, True),
     (">=", 1, 1, True), ("<=", 2, 1, False)],
)
def test_every_numeric_relop(relop, requested, offered, expected):
    cx = Complex("n", "n", ValueType.INT, Relop(relop), Requestable.YES, Consumable.NO, "0", 0)
    assert satisfies(cx, requested, offered) is expected


def test_exclusive_relop():
    excl = table_with("excl ex BOOL EXCL YES YES 0 1000").resolve("excl")
    assert satisfies(excl, False, 0) is True  # not asking for exclusivity always fits
    assert satisfies(excl, True, 1) is True
    assert satisfies(excl, True, 0) is False
    assert consumable_amount(excl, True, 8) == 1  # slots are ignored for exclusive consumables
    assert consumable_amount(excl, None, 8) == 0


# -- requests --------------------------------------------------------------------------
def test_validate_requests_interface_example():
    # examples.md J7: ResourceRequests = [ h_rt = "1:00:00"; mem_free = "2G"; compiler_lic = 1; arch = "lx*-amd64|sol*" ]
    parsed = validate_requests(BASE, {"h_rt": "1:00:00", "mem_free": "2G", "compiler_lic": 1, "arch": "lx*-amd64|sol*"})
    assert parsed == {"h_rt": 3600, "mem_free": 2147483648, "compiler_lic": 1, "arch": "lx*-amd64|sol*"}
    arch = BASE.resolve("arch")
    assert [satisfies(arch, parsed["arch"], v) for v in ("lx-amd64", "lx24-amd64", "sol-sparc64", "lx-x86", "darwin-x86")] \
        == [True, True, True, False, False]


def test_validate_requests_shortcuts_become_names():
    assert validate_requests(BASE, {"mf": "1G", "cl": "2", "a": "lx*", "s": 4}) == {
        "mem_free": G, "compiler_lic": 2, "arch": "lx*", "slots": 4}


@pytest.mark.parametrize(
    "requests, message",
    [
        ({"foo": 1}, "ResourceRequests.foo: unknown resource 'foo'"),
        ({"load_avg": 1}, 'ResourceRequests.load_avg: resource "load_avg" configured as non requestable'),
        ({"tmp": "/x"}, 'ResourceRequests.tmp: resource "tmpdir" configured as non requestable'),
        ({"h_vmem": "lots"}, "ResourceRequests.h_vmem: attribute \"h_vmem\" is not a memory value "
                             "('lots': no number found)"),
        ({"arch": "a||b"}, "ResourceRequests.arch: invalid wildcard expression 'a||b': unexpected '|'; "
                           "expected a pattern, '!' or '(' at position 3"),
        ({"mf": "1G", "mem_free": "2G"}, "ResourceRequests.mem_free: mem_free is requested twice (as 'mf' and 'mem_free')"),
        ({"cl": -1}, 'ResourceRequests.cl: attribute "compiler_lic" is consumable but has a negative value'),
        ({"slots": "infinity"}, 'ResourceRequests.slots: attribute "slots" is consumable and cannot be infinity'),
    ],
)
def test_validate_requests_refusals(requests, message):
    with pytest.raises(InvalidInput) as caught:
        validate_requests(BASE, requests)
    assert str(caught.value) == message


def test_validate_requests_custom_where():
    with pytest.raises(InvalidInput) as caught:
        validate_requests(BASE, {"foo": 1}, where="job 3")
    assert caught.value.where == "job 3.foo"


# -- 1.4 consumables; SPEC 000 E1 and E2 ----------------------------------------------
def test_per_slot_consumable_on_durin():
    cl = BASE.resolve("cl")  # durin: complex_values compiler_lic=10
    first = consumable_amount(cl, 2, 4)
    assert first == 8
    assert fits(first, 10, 0)
    assert 10 - first == 2
    assert not fits(consumable_amount(cl, 2, 4), 10, first)


def test_per_job_consumable_on_durin():
    cl = table_with("compiler_lic cl INT <= YES JOB 0 0").resolve("cl")
    assert consumable_amount(cl, 2, 4) == 2
    assert 10 - consumable_amount(cl, 2, 4) == 8
    assert consumable_amount(cl, 2, 4, master=False) == 0  # slave hosts need none


def test_serial_job_debits_one_slot():
    assert consumable_amount(BASE.resolve("slots"), None, 1) == 1


def test_default_debited_per_slot_when_not_requested():
    lic = table_with("lic l INT <= YES YES 1 0").resolve("lic")
    assert consumable_amount(lic, None, 1) == 1
    assert consumable_amount(lic, None, 4) == 4


def test_default_zero_debits_nothing():
    cl = BASE.resolve("cl")
    assert consumable_amount(cl, None, 4) == 0
    assert fits(0, 0, 0)  # may run where compiler_lic is 0


def test_not_consumable_debits_nothing():
    assert consumable_amount(BASE.resolve("h_vmem"), "2G", 4) == 0


def test_spec_000_e1_fixed_values_are_per_slot():
    table = table_with("t01 t01 INT <= YES NO 0 0")
    t01 = table.resolve("t01")
    # j1 requests t01=10 with 4 slots; q1 has 5 slots and t01 <= 20
    assert satisfies(t01, 10, 20)  # 10 <= 20 is checked per slot, not 40 <= 20
    assert consumable_amount(t01, 10, 4) == 0
    slots = table.resolve("slots")
    taken = consumable_amount(slots, None, 4)
    assert fits(taken, 5, 0)
    assert 5 - taken == 1  # q1 afterwards: 1 slot, still t01 <= 20


def test_spec_000_e2_consumables_are_debited_per_instance():
    t02 = table_with("t02 t02 INT <= YES YES 0 0").resolve("t02")
    # q2 (5 slots, t02 40) takes two instances, q3 (1 slot, 40) one, q4 (3 slots, 40) one
    on_q2, on_q3, on_q4 = consumable_amount(t02, 20, 2), consumable_amount(t02, 20, 1), consumable_amount(t02, 20, 1)
    assert (on_q2, on_q3, on_q4) == (40, 20, 20)
    assert all(fits(amount, 40, 0) for amount in (on_q2, on_q3, on_q4))
    assert (40 - on_q2, 40 - on_q3, 40 - on_q4) == (0, 20, 20)
    assert not fits(consumable_amount(t02, 20, 1), 40, on_q2)  # a third instance no longer fits on q2
    # as a hierarchy check on remaining capacity
    assert check_hierarchy(t02, 20, [Offer("queue", 40 - on_q2, "capacity")]) == Shortfall(
        "t02", 20, 0, "queue", "capacity", ValueType.INT)
    assert check_hierarchy(t02, 20, [Offer("queue", 40 - on_q2, "capacity")]).reason() == \
        "t02=20 requested, 0 offered (queue free capacity)"


# -- 1.5 overriding; SPEC 000 section 3 -----------------------------------------------
MF = BASE.resolve("mem_free")


@pytest.mark.parametrize(
    "fixed, load, expected",
    [
        ("1G", "4G", Offer("host", "1G", "fixed")),  # custom 1 GB / load 4 GB / result 1 GB
        ("1G", "0.9G", Offer("host", "0.9G", "load")),  # custom 1 GB / load 0.9 GB / result 0.9 GB
        ("1G", "1G", Offer("host", "1G", "fixed")),
        ("1G", None, Offer("host", "1G", "fixed")),
        (None, "4G", Offer("host", "4G", "load")),
        (None, None, None),
    ],
)
def test_effective_offer_mem_free(fixed, load, expected):
    assert effective_offer(MF, fixed, load) == expected


def test_fixed_mem_free_restricts_the_load():
    offer = effective_offer(MF, parse_memory("1G"), parse_memory("4G"))
    assert check_hierarchy(MF, parse_memory("2G"), [offer]).reason() == \
        "mem_free=2G requested, 1G offered (host configured value)"


def test_lower_bound_relop_keeps_the_larger_value():
    mu = BASE.resolve("mem_used")  # >=: a larger offer is more restrictive
    assert effective_offer(mu, "1G", "2G") == Offer("host", "2G", "load")
    assert effective_offer(mu, "3G", "2G") == Offer("host", "3G", "fixed")
    # The host's 0.5G does not widen the global 1G: 0.7G is still refused there.
    offers = [Offer("global", "1G"), Offer("host", "0.5G", "load")]
    assert check_hierarchy(mu, "0.7G", offers).level == "global" and check_hierarchy(mu, "1.5G", offers) is None


def test_queue_cannot_raise_what_the_host_load_says():
    offers = [Offer("host", 4 * G, "load"), Offer("queue", 8 * G, "fixed")]
    assert check_hierarchy(MF, 2 * G, offers) is None
    shortfall = check_hierarchy(MF, 6 * G, offers)
    assert shortfall == Shortfall("mem_free", 6 * G, 4 * G, "host", "load", ValueType.MEMORY)
    assert shortfall.reason() == "mem_free=6G requested, 4G offered (host load value)"


def test_queue_may_narrow():
    offers = [Offer("host", 4 * G, "load"), Offer("queue", 2 * G, "fixed")]
    assert check_hierarchy(MF, 4 * G, offers).reason() == "mem_free=4G requested, 2G offered (queue configured value)"


def test_shortfall_reason_of_the_brief():
    shortfall = check_hierarchy(MF, parse_memory("4G"), [Offer("host", parse_memory("2G"), "load")])
    assert shortfall.reason() == "mem_free=4G requested, 2G offered (host load value)"


def test_arch_fixed_overrides_load_on_the_same_level():
    arch = BASE.resolve("arch")
    assert effective_offer(arch, "lx26-amd64", "lx-amd64") == Offer("host", "lx26-amd64", "fixed")


def test_equality_is_tested_on_every_level():
    arch = BASE.resolve("arch")
    offers = [Offer("host", "lx26-amd64", "fixed"), Offer("queue", "lx24-amd64", "fixed")]
    assert check_hierarchy(arch, "lx2*", offers) is None
    shortfall = check_hierarchy(arch, "lx26*", offers)
    assert shortfall == Shortfall("arch", "lx26*", "lx24-amd64", "queue", "fixed", ValueType.RESTRING)
    assert shortfall.reason() == "arch=lx26* requested, lx24-amd64 offered (queue configured value)"


def test_missing_level_is_skipped():
    offers = [Offer("queue", 8 * G, "fixed"), Offer("global", 16 * G, "fixed")]  # no host value; any order
    assert check_hierarchy(MF, 6 * G, offers) is None
    assert check_hierarchy(MF, 10 * G, offers).level == "queue"
    assert check_hierarchy(MF, 6 * G, [Offer("host", None, "load"), Offer("queue", 8 * G)]) is None


def test_first_failing_level_ends_the_evaluation():
    offers = [Offer("global", 1 * G, "fixed"), Offer("host", 8 * G, "load")]
    assert check_hierarchy(MF, 2 * G, offers).level == "global"


def test_time_shortfall_is_formatted_as_time():
    h_rt = BASE.resolve("h_rt")
    assert check_hierarchy(h_rt, 10800, [Offer("queue", 7200)]).reason() == \
        "h_rt=03:00:00 requested, 02:00:00 offered (queue configured value)"
    assert check_hierarchy(h_rt, 3600, [Offer("queue", math.inf)]) is None


def test_not_offered_anywhere():
    assert check_hierarchy(MF, G, []).reason() == "mem_free=1G requested, not offered on any level"


def test_offer_levels_are_checked():
    with pytest.raises(InvalidInput):
        Offer("cluster", 1)
    with pytest.raises(InvalidInput):
        Offer("host", 1, "guess")
    with pytest.raises(InvalidInput):
        check_hierarchy(MF, G, [Offer("host", G), Offer("host", 2 * G, "load")])


# -- 1.6 FORCED -----------------------------------------------------------------------
FORCED = table_with("lic l INT <= FORCED YES 0 0")


def test_forced_requested_may_run_where_defined():
    lic = FORCED.resolve("lic")
    requests = validate_requests(FORCED, {"lic": 1})
    assert forced_missing(FORCED, requests, ["lic", "slots"]) == []  # durin
    assert check_hierarchy(lic, 1, [Offer("host", 4)]) is None  # durin has lic=4
    assert check_hierarchy(lic, 1, []).reason() == "lic=1 requested, not offered on any level"  # carc


def test_forced_not_requested():
    assert validate_requests(FORCED, {}) == {}  # accepted at submission
    assert forced_missing(FORCED, {}, ["slots"]) == []  # carc: may run
    assert forced_missing(FORCED, {}, ["lic", "slots"]) == ["lic"]  # durin: may not
    assert forced_missing(FORCED, {"l": 1}, ["l"]) == []  # shortcuts on both sides


# -- qconf -sc / -Mc ------------------------------------------------------------------
def test_render_like_qconf_sc():
    lines = BASE.render().splitlines()
    assert lines[0] == "#name               shortcut   type        relop requestable consumable default  urgency"
    assert lines[1] == "#" + "-" * 88
    assert lines[2] == "arch                a          RESTRING    ==    YES         NO         NONE     0"
    assert lines[4] == "compiler_lic        cl         INT         <=    YES         YES        0        100"
    assert "h_rt                h_rt       TIME        <=    YES         NO         0:0:0    0" in lines
    assert "slots               s          INT         <=    YES         YES        1        1000" in lines
    assert lines[-1] == RENDER_FOOTER
    assert len(lines) == 2 + 53 + 1


def test_render_widens_for_long_values():
    table = table_with("a_rather_long_complex_name arlcn INT <= YES NO 0 0")
    lines = table.render().splitlines()
    assert lines[0].startswith("#name                      shortcut")
    assert "a_rather_long_complex_name arlcn      INT" in table.render()


def test_parse_reads_back_render():
    text = BASE.render()
    again = ComplexTable.parse(text)
    assert again.render() == text
    assert list(again) == list(BASE)


def test_parse_ignores_comments_and_blank_lines():
    text = "# my complexes\n\n" + ComplexTable.builtin().render() + "\n   \ncompiler_lic cl INT <= YES YES 0 0\n"
    assert ComplexTable.parse(text).resolve("cl").consumable is Consumable.YES


def test_parse_errors_name_the_line():
    text = ComplexTable.builtin().render() + "compiler_lic cl INT <= YES\nflag fl BOOL == YES YES 0 0\n"
    with pytest.raises(ComplexDefinitionError) as caught:
        ComplexTable.parse(text, source="complexes.txt")
    assert str(caught.value) == (
        "complexes.txt:56: expected 8 columns (name shortcut type relop requestable consumable default urgency), got 5")
    good_columns = ComplexTable.builtin().render() + "\n\nflag fl BOOL == YES YES 0 0\n"
    with pytest.raises(ComplexDefinitionError) as caught:
        ComplexTable.parse(good_columns)
    assert caught.value.where == "complexes:58"
    assert str(caught.value) == ('complexes:58: Exclusive complex "flag" must have EXCL as relational operator; '
                                 'Consumable "flag" can have only <= as an relational operator')


def test_builtins_cannot_be_deleted():
    with pytest.raises(ComplexDefinitionError) as caught:
        ComplexTable.parse("arch a RESTRING == YES NO NONE 0\n")
    messages = [message for _, message in caught.value.problems]
    assert len(messages) == 51
    assert messages[0] == 'built-in complex "calendar" cannot be deleted'


def test_constructor_accepts_complex_objects():
    table = ComplexTable(list(BUILTIN_COMPLEXES) + [
        Complex("lic", "l", ValueType.INT, Relop.LE, Requestable.YES, Consumable.YES, "0", 0)])
    assert table.resolve("l").builtin is False
    assert table.resolve("arch").builtin is True
