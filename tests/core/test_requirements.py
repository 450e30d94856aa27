"""RFC #7 Requirements: canonical form, SubmitPool ids, eligibility (SPEC 002,
examples.md J2)."""

from __future__ import annotations

import copy
import re

import pytest

from wms.core.errors import InvalidInput
from wms.core.requirements import (
    canonical_requirements,
    check_queue,
    eligible_queues,
    eligible_sites,
    submit_pool_id,
)
from wms.core.resources import QueueRef, Resources

from .test_resources import INTERFACE_TREE, LONG

TYPES = {"Memory": "number", "CPUModel": "string", "SoftwareTag": "list"}
J2_RECORD = {
    "SoftwareTag": ["AppVersion1", "AppVersion2"],
    "CPUModel": "Intel Xeon",
    "Memory": 4000,
}


def _check(req: dict, tree: dict = INTERFACE_TREE, vo: str | None = None,
           ref: QueueRef = LONG) -> str | None:
    canonical = canonical_requirements(req, TYPES)
    return check_queue(canonical, Resources(tree, vo=vo).queue_parameters(ref), TYPES)


def _with_queue(**params: object) -> dict:
    tree = copy.deepcopy(INTERFACE_TREE)
    tree["LCG.CERN.ch"]["CEs"]["ce01.cern.ch"]["Queues"]["long"].update(params)
    return tree


# -- examples.md J2, every row -------------------------------------------------------
def test_j2_full_record_is_not_eligible() -> None:
    assert _check(J2_RECORD) == "CPUModel: not described for this queue"
    canonical = canonical_requirements({"Memory": 4000}, TYPES)
    params = Resources(INTERFACE_TREE).queue_parameters(LONG)
    assert check_queue(canonical, params, TYPES) == "Memory: not described for this queue"


def test_j2_a_list_is_met_by_any_one_value() -> None:
    assert _check({"SoftwareTag": ["AppVersion2", "AppVersion9"]}) is None


def test_j2_a_value_the_queue_does_not_offer() -> None:
    assert _check({"SoftwareTag": "AppVersion3"}) == (
        "SoftwareTag: queue offers ['AppVersion1', 'AppVersion2'], job needs one of ['AppVersion3']"
    )


def test_j2_inherited_from_the_site() -> None:
    assert _check({"Country": "ch"}) is None
    assert _check({"Country": "uk"}) == "Country: queue offers 'ch', job needs 'uk'"


@pytest.mark.parametrize(("offered", "expected"), [(8000, None), (4000, None),
                                                   (2000, "Memory: queue offers 2000, job needs 4000")])
def test_j2_numbers_are_capacities(offered: int, expected: str | None) -> None:
    assert _check({"Memory": 4000}, _with_queue(Memory=offered)) == expected


def test_j2_vo_site_value_against_queue_value() -> None:
    # OPEN QUESTION of J2, decided: the queue level wins over the site's VO level.
    assert _check({"SoftwareTag": ["AppVersion2"]}, vo="lhcb") is None
    # With no queue-level value, lhcb sees its site-level VO list...
    tree = copy.deepcopy(INTERFACE_TREE)
    del tree["LCG.CERN.ch"]["CEs"]["ce01.cern.ch"]["Queues"]["long"]["SoftwareTag"]
    assert _check({"SoftwareTag": "AppVersion1"}, tree, vo="lhcb") is None
    assert _check({"SoftwareTag": "AppVersion2"}, tree, vo="lhcb") is not None
    # ...and other VOs do not see lhcb's values at all.
    assert _check({"SoftwareTag": "AppVersion1"}, tree, vo="dteam") == (
        "SoftwareTag: not described for this queue"
    )
    assert _check({"SoftwareTag": "AppVersion1"}, tree) == "SoftwareTag: not described for this queue"


def test_j2_record_eligible_on_a_queue_describing_everything() -> None:
    tree = _with_queue(Memory=8000, CPUModel="Intel Xeon")
    assert _check(J2_RECORD, tree) is None


# -- check_queue rules -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("job", "queue", "eligible"),
    [
        ({"CPUModel": "Intel Xeon"}, {"CPUModel": "Intel Xeon"}, True),
        ({"CPUModel": "Intel Xeon"}, {"CPUModel": "intel xeon"}, False),  # case-sensitive
        ({"CPUModel": "Intel Xeon"}, {"CPUModel": ["AMD EPYC", "Intel Xeon"]}, True),
        ({"CPUModel": ["AMD EPYC", "Ampere"]}, {"CPUModel": "AMD EPYC"}, True),
        ({"CPUModel": ["AMD EPYC", "Ampere"]}, {"CPUModel": "Intel Xeon"}, False),
        ({"Memory": 4000}, {"Memory": "8000"}, True),
        ({"Memory": 1.5}, {"Memory": 1}, False),
        ({"Memory": 4000}, {"Memory": "lots"}, False),
        ({"SoftwareTag": "A"}, {"SoftwareTag": "A"}, True),
        ({"SoftwareTag": ["A", "B"]}, {"SoftwareTag": ["B", "C"]}, True),
        ({"Cores": 8}, {"Cores": 16}, True),  # undescribed number -> capacity
        ({"Cores": 32}, {"Cores": 16}, False),
        ({"Gpu": True}, {"Gpu": True}, True),
        ({"Gpu": True}, {"Gpu": False}, False),
        ({"Gpu": True}, {"Gpu": 1}, False),
        ({"Tag": "16"}, {"Tag": [16, "x"]}, True),  # a number equals its plain spelling
        ({"Tag": "1.10"}, {"Tag": "1.1"}, False),  # strings are never read as numbers
        ({"memory": 100}, {"MEMORY": 100}, True),  # names ignore case
    ],
)
def test_check_queue_rules(job: dict, queue: dict, eligible: bool) -> None:
    canonical = canonical_requirements(job, TYPES)
    reason = check_queue(canonical, queue, TYPES)
    assert (reason is None) is eligible, reason


def test_check_queue_reasons_name_the_parameter() -> None:
    canonical = canonical_requirements({"Memory": 4000, "CPUModel": "X"}, TYPES)
    assert check_queue(canonical, {"Memory": 4000}, TYPES) == "CPUModel: not described for this queue"
    assert check_queue(canonical, {"Memory": 4000, "cpumodel": "Y"}, TYPES) == (
        "cpumodel: queue offers 'Y', job needs 'X'"
    )
    assert check_queue(canonical, {"CPUModel": "X", "Memory": "big"}, TYPES) == (
        "Memory: queue value 'big' is not a number"
    )
    assert check_queue({}, {}, TYPES) is None


# -- canonical form -------------------------------------------------------------------
def test_canonical_form() -> None:
    canonical = canonical_requirements(
        {
            " SoftwareTag": [" AppVersion2", "AppVersion1 ", "AppVersion2"],
            "CPUModel": "  Intel Xeon ",
            "memory": "4000",
            "Ratio": 1.5,
            "Whole": 8.0,
            "GPU": True,
            "Tags": ["b", 2, "a", 2.0],
        },
        TYPES,
    )
    assert canonical == {
        "cpumodel": "Intel Xeon",
        "gpu": True,
        "memory": 4000,
        "ratio": 1.5,
        "softwaretag": ["AppVersion1", "AppVersion2"],
        "tags": [2, "a", "b"],
        "whole": 8,
    }
    assert list(canonical) == sorted(canonical)


@pytest.mark.parametrize("value", [4000, 4000.0, "4000", " 4000 "])
def test_numbers_are_normalised(value: object) -> None:
    assert canonical_requirements({"Memory": value}, TYPES) == {"memory": 4000}


def test_one_item_list_equals_scalar() -> None:
    assert canonical_requirements({"SoftwareTag": "A"}, TYPES) == {"softwaretag": ["A"]}
    assert canonical_requirements({"SoftwareTag": ["A"]}, TYPES) == {"softwaretag": ["A"]}
    assert canonical_requirements({"CPUModel": ["X"]}, TYPES) == {"cpumodel": "X"}
    assert canonical_requirements({"CPUModel": ["Y", "X"]}, TYPES) == {"cpumodel": ["X", "Y"]}


def test_types_are_looked_up_without_case() -> None:
    assert canonical_requirements({"MEMORY": "4000"}, {"memory": "Number"}) == {"memory": 4000}
    # Undescribed: the type comes from the value, so a string stays a string.
    assert canonical_requirements({"Memory": "4000"}, {}) == {"memory": "4000"}


@pytest.mark.parametrize(
    ("req", "message"),
    [
        ({"Memory": "lots"}, "Requirements.Memory: expected a number, got 'lots'"),
        ({"Memory": [1000, 2000]}, "Requirements.Memory: expected a number, got a list: a number is the least capacity"),
        ({"Memory": True}, "Requirements.Memory: expected a number, got True"),
        ({"Memory": float("nan")}, "Requirements.Memory: expected a finite number"),
        ({"SoftwareTag": []}, "Requirements.SoftwareTag: an empty list"),
        ({"Tags": []}, "Requirements.Tags: an empty list"),
        ({"SoftwareTag": [["A"]]}, "Requirements.SoftwareTag: a list item cannot itself be a list"),
        ({"SoftwareTag": [{"A": 1}]}, "Requirements.SoftwareTag: nested records"),
        ({"SoftwareTag": ["A", " "]}, "Requirements.SoftwareTag: empty string"),
        ({"Inner": {"A": 1}}, "Requirements.Inner: nested records are not allowed"),
        ({"": 1}, "Requirements: a parameter name must be a non-empty string"),
        ({"  ": 1}, "Requirements: a parameter name must be a non-empty string"),
        ({"CPUModel": 7763}, "Requirements.CPUModel: expected a string, got 7763"),
        ({"CPUModel": "  "}, "Requirements.CPUModel: empty string"),
        ({"CPUModel": None}, "Requirements.CPUModel: no value given"),
        ({"Memory": 1, "memory": 2}, "Requirements.memory: given twice"),
    ],
)
def test_canonical_refuses(req: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        canonical_requirements(req, TYPES)


def test_canonical_refuses_where() -> None:
    with pytest.raises(InvalidInput) as info:
        canonical_requirements({"Memory": "lots"}, TYPES)
    assert info.value.where == "Requirements.Memory"
    assert info.value.message == "expected a number, got 'lots'"


# -- SubmitPool id invariants ----------------------------------------------------------
def _pool(req: dict) -> str:
    return submit_pool_id(canonical_requirements(req, TYPES))


def test_pool_id_shape() -> None:
    pool = _pool(J2_RECORD)
    assert re.fullmatch(r"[0-9a-f]{16}", pool)


@pytest.mark.parametrize(
    "variant",
    [
        {"Memory": 4000, "CPUModel": "Intel Xeon", "SoftwareTag": ["AppVersion1", "AppVersion2"]},
        {"memory": 4000.0, "cpumodel": " Intel Xeon", "SOFTWARETAG": ["AppVersion2", "AppVersion1"]},
        {"CPUModel": "Intel Xeon  ", "SoftwareTag": ["AppVersion2", "AppVersion1", "AppVersion1"], "Memory": "4000"},
    ],
)
def test_same_requirements_same_pool(variant: dict) -> None:
    assert _pool(variant) == _pool(J2_RECORD)


@pytest.mark.parametrize(
    "changed",
    [
        {**J2_RECORD, "Memory": 4001},
        {**J2_RECORD, "CPUModel": "Intel xeon"},
        {**J2_RECORD, "SoftwareTag": ["AppVersion1"]},
        {**J2_RECORD, "SoftwareTag": ["AppVersion1", "AppVersion3"]},
        {**J2_RECORD, "Extra": "x"},
        {"SoftwareTag": ["AppVersion1", "AppVersion2"], "CPUModel": "Intel Xeon"},
    ],
)
def test_changed_requirements_other_pool(changed: dict) -> None:
    assert _pool(changed) != _pool(J2_RECORD)


def test_one_item_list_and_scalar_share_a_pool() -> None:
    assert _pool({"SoftwareTag": "A"}) == _pool({"SoftwareTag": ["A"]})


# -- eligible queues and sites ---------------------------------------------------------
GRID = {
    "A.site": {
        "CEs": {
            "ce": {
                "Memory": 2000,
                "Queues": {"small": {}, "big": {"Memory": 8000}},
            }
        }
    },
    "B.site": {
        "VO": {"lhcb": {"Memory": 16000}},
        "CEs": {"ce": {"Queues": {"q": {}}}},
    },
}


def test_eligible_queues_and_sites() -> None:
    canonical = canonical_requirements({"Memory": 4000}, TYPES)
    queues = eligible_queues(canonical, Resources(GRID), TYPES)
    assert queues == [QueueRef("A.site", "ce", "big")]
    queues = eligible_queues(canonical, Resources(GRID, vo="lhcb"), TYPES)
    assert [q.name for q in queues] == ["A.site/ce/big", "B.site/ce/q"]
    assert eligible_sites(queues) == ["A.site", "B.site"]
    assert eligible_sites([]) == []
    assert len(eligible_queues({}, Resources(GRID), TYPES)) == 3


def test_an_expression_the_library_raises_on_is_refused_at_submission_and_kept_by_the_refresh() -> None:
    from wms.core import classad, pools

    # random(0) raises where the queue has 16000 MB (1 - 1 = 0), is Undefined or false elsewhere
    document = pools.pool_document("lhcb", expression="random(other.Memory / 16000 - 1) >= 0")
    with pytest.raises(classad.ClassAdEvalError, match="^Requirements: cannot evaluate .*failed to evaluate"):
        pools.pool_queues(document, Resources(GRID, vo="lhcb"), TYPES)
    kept = pools.pool_queues(document, Resources(GRID, vo="lhcb"), TYPES, strict=False)
    assert QueueRef("B.site", "ce", "q") in kept
