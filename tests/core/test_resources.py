"""The Resources helper: SPEC 002 inheritance, VO views, getEligibleNodes."""

from __future__ import annotations

import pytest

from wms.core.errors import InvalidInput, NotFound
from wms.core.resources import QueueRef, Resources

# The tree of INTERFACE.md, "Configuration directory".
INTERFACE_TREE = {
    "LCG.CERN.ch": {
        "Country": "ch",
        "VO": {"lhcb": {"SoftwareTag": ["AppVersion1"]}},
        "CEs": {
            "ce01.cern.ch": {
                "Platform": "x86_64-el9",
                "Queues": {
                    "long": {
                        "CPUTime": 172800,
                        "SoftwareTag": ["AppVersion1", "AppVersion2"],
                        "complex_values": {"slots": 100, "compiler_lic": 4},
                    }
                },
            }
        },
    }
}
LONG = QueueRef("LCG.CERN.ch", "ce01.cern.ch", "long")


def _levels_tree() -> dict:
    """P is stated at all six levels; each test removes the stronger ones."""
    return {
        "S": {
            "P": "site",
            "VO": {"lhcb": {"P": "site-vo"}},
            "CEs": {
                "C": {
                    "P": "ce",
                    "VO": {"lhcb": {"P": "ce-vo"}},
                    "Queues": {"Q": {"P": "queue", "VO": {"lhcb": {"P": "queue-vo"}}}},
                }
            },
        }
    }


# -- QueueRef -----------------------------------------------------------------------
def test_queue_ref_name_parse_and_order() -> None:
    ref = QueueRef.parse("LCG.CERN.ch/ce01.cern.ch/long")
    assert ref == LONG
    assert ref.name == "LCG.CERN.ch/ce01.cern.ch/long"
    assert str(ref) == ref.name
    assert sorted([QueueRef("b", "a", "a"), QueueRef("a", "b", "a"), QueueRef("a", "a", "b")]) == [
        QueueRef("a", "a", "b"),
        QueueRef("a", "b", "a"),
        QueueRef("b", "a", "a"),
    ]
    with pytest.raises(AttributeError):
        ref.site = "x"  # type: ignore[misc]


@pytest.mark.parametrize("text", ["A/B", "A/B/C/D", "A//C", "", "/B/C", 42])
def test_queue_ref_parse_refuses(text: object) -> None:
    with pytest.raises(InvalidInput, match="Site/CE/Queue"):
        QueueRef.parse(text)  # type: ignore[arg-type]


# -- inheritance ------------------------------------------------------------------
def test_interface_queue_parameters() -> None:
    params = Resources(INTERFACE_TREE).queue_parameters(LONG)
    assert params == {
        "Country": "ch",
        "Platform": "x86_64-el9",
        "CPUTime": 172800,
        "SoftwareTag": ["AppVersion1", "AppVersion2"],
        "complex_values": {"slots": 100, "compiler_lic": 4},
        "Site": "LCG.CERN.ch",
        "CE": "ce01.cern.ch",
        "Queue": "long",
    }


@pytest.mark.parametrize(
    ("remove", "expected"),
    [
        ([], "queue-vo"),
        (["queue-vo"], "queue"),
        (["queue-vo", "queue"], "ce-vo"),
        (["queue-vo", "queue", "ce-vo"], "ce"),
        (["queue-vo", "queue", "ce-vo", "ce"], "site-vo"),
        (["queue-vo", "queue", "ce-vo", "ce", "site-vo"], "site"),
    ],
)
def test_precedence_of_the_six_levels(remove: list[str], expected: str) -> None:
    tree = _levels_tree()
    site = tree["S"]
    ce = site["CEs"]["C"]
    queue = ce["Queues"]["Q"]
    holders = {
        "queue-vo": queue["VO"]["lhcb"],
        "queue": queue,
        "ce-vo": ce["VO"]["lhcb"],
        "ce": ce,
        "site-vo": site["VO"]["lhcb"],
        "site": site,
    }
    for level in remove:
        del holders[level]["P"]
    assert Resources(tree, vo="lhcb").queue_parameters(QueueRef("S", "C", "Q"))["P"] == expected


def test_without_vo_or_with_another_vo_the_vo_blocks_are_invisible() -> None:
    tree = _levels_tree()
    assert Resources(tree).queue_parameters("S/C/Q")["P"] == "queue"
    assert Resources(tree, vo="dteam").queue_parameters("S/C/Q")["P"] == "queue"
    del tree["S"]["CEs"]["C"]["Queues"]["Q"]["P"]
    assert Resources(tree, vo="dteam").queue_parameters("S/C/Q")["P"] == "ce"
    assert Resources(tree, vo="lhcb").queue_parameters("S/C/Q")["P"] == "queue-vo"


def test_j2_open_question_queue_level_wins_over_site_vo() -> None:
    # examples.md J2: site-level VO value [AppVersion1], queue level
    # [AppVersion1, AppVersion2]: the more specific level wins, values are replaced.
    params = Resources(INTERFACE_TREE, vo="lhcb").queue_parameters(LONG)
    assert params["SoftwareTag"] == ["AppVersion1", "AppVersion2"]
    tree = {
        "S": {
            "VO": {"lhcb": {"SoftwareTag": ["A"]}},
            "CEs": {"C": {"Queues": {"Q": {}}}},
        }
    }
    assert Resources(tree, vo="lhcb").queue_parameters("S/C/Q")["SoftwareTag"] == ["A"]
    assert "SoftwareTag" not in Resources(tree, vo="dteam").queue_parameters("S/C/Q")


def test_site_and_ce_parameters() -> None:
    res = Resources(INTERFACE_TREE, vo="lhcb")
    assert res.get_eligible_nodes("Site")["LCG.CERN.ch"] == {
        "Country": "ch",
        "SoftwareTag": ["AppVersion1"],
        "Site": "LCG.CERN.ch",
    }
    assert res.get_eligible_nodes("CE")["LCG.CERN.ch"]["ce01.cern.ch"] == {
        "Country": "ch",
        "SoftwareTag": ["AppVersion1"],
        "Platform": "x86_64-el9",
        "Site": "LCG.CERN.ch",
        "CE": "ce01.cern.ch",
    }
    assert Resources(INTERFACE_TREE).get_eligible_nodes("Site")["LCG.CERN.ch"] == {
        "Country": "ch",
        "Site": "LCG.CERN.ch",
    }


def test_names_ignore_case_but_keep_the_winning_casing() -> None:
    tree = {"S": {"memory": 1000, "CEs": {"C": {"Queues": {"Q": {"MEMORY": 2000}}}}}}
    res = Resources(tree)
    assert res.queue_parameters("S/C/Q") == {"MEMORY": 2000, "Site": "S", "CE": "C", "Queue": "Q"}
    assert res.queue_parameter_map("S/C/Q")["Memory"] == 2000
    assert "memory" in res.queue_parameter_map("S/C/Q")


def test_returned_dicts_are_copies() -> None:
    res = Resources(INTERFACE_TREE)
    res.queue_parameters(LONG)["SoftwareTag"].append("X")
    assert res.queue_parameters(LONG)["SoftwareTag"] == ["AppVersion1", "AppVersion2"]


def test_listing_and_unknown_nodes() -> None:
    tree = {
        "B": {"CEs": {"c2": {"Queues": {"q": {}}}, "c1": {"Queues": {"z": {}, "a": {}}}}},
        "A": {},
    }
    res = Resources(tree)
    assert res.sites() == ["A", "B"]
    assert res.ces("B") == ["c1", "c2"]
    assert [q.name for q in res.queues()] == ["B/c1/a", "B/c1/z", "B/c2/q"]
    assert res.has_queue(QueueRef("B", "c2", "q"))
    with pytest.raises(NotFound):
        res.queue_parameters("B/c2/nope")
    with pytest.raises(NotFound, match="unknown site 'C'"):
        res.ces("C")


# -- getEligibleNodes --------------------------------------------------------------
GRID = {
    "S1": {
        "Country": "ch",
        "CEs": {
            "ce1": {
                "Platform": "el9",
                "Queues": {"long": {"CPUTime": 172800}, "short": {"CPUTime": 3600}},
            },
            "ce2": {"Platform": ["el8", "el9"], "Queues": {"q": {"CPUTime": 86400, "Tags": ["GPU"]}}},
        },
    },
    "S2": {
        "Country": "uk",
        "VO": {"lhcb": {"Platform": "el9"}},
        "CEs": {"ce3": {"Queues": {"q": {"CPUTime": 86400}}}, "empty": {}},
    },
    "S3": {"Country": "fr"},
}


def test_eligible_queues_without_selection() -> None:
    nodes = Resources(GRID).get_eligible_nodes("Queue")
    assert {s: {c: sorted(q) for c, q in ces.items()} for s, ces in nodes.items()} == {
        "S1": {"ce1": ["long", "short"], "ce2": ["q"]},
        "S2": {"ce3": ["q"]},
    }
    assert nodes["S1"]["ce1"]["long"]["CPUTime"] == 172800
    assert nodes["S1"]["ce1"]["long"]["Country"] == "ch"


def test_eligible_queues_with_ce_and_queue_selection() -> None:
    res = Resources(GRID)
    # A node list value is selected when any item is acceptable.
    assert res.get_eligible_nodes("Queue", ce_select={"Platform": "el9"}).keys() == {"S1"}
    by_ce = res.get_eligible_nodes("Queue", ce_select={"platform": "el8"})
    assert list(by_ce) == ["S1"] and list(by_ce["S1"]) == ["ce2"]
    # A select value list means any of; numbers compare by value.
    nodes = res.get_eligible_nodes("Queue", queue_select={"CPUTime": [3600, 86400.0]})
    assert {s: {c: sorted(q) for c, q in ces.items()} for s, ces in nodes.items()} == {
        "S1": {"ce1": ["short"], "ce2": ["q"]},
        "S2": {"ce3": ["q"]},
    }
    # Both at once, and the names Site/CE/Queue are parameters too.
    nodes = res.get_eligible_nodes("Queue", {"Site": "S1"}, {"Queue": "long"})
    assert nodes == {"S1": {"ce1": {"long": res.queue_parameters("S1/ce1/long")}}}
    # VO view: S2's lhcb Platform is visible only to lhcb.
    assert Resources(GRID, vo="lhcb").get_eligible_nodes("Queue", {"Platform": "el9"}).keys() == {
        "S1",
        "S2",
    }


def test_eligible_ces_and_sites() -> None:
    res = Resources(GRID)
    ces = res.get_eligible_nodes("CE")
    assert {s: sorted(c) for s, c in ces.items()} == {"S1": ["ce1", "ce2"], "S2": ["ce3", "empty"]}
    assert ces["S1"]["ce2"]["Platform"] == ["el8", "el9"]
    assert "Queues" not in ces["S1"]["ce1"]
    ces = res.get_eligible_nodes("CE", queue_select={"Tags": "GPU"})
    assert ces == {"S1": {"ce2": res.get_eligible_nodes("CE")["S1"]["ce2"]}}
    sites = res.get_eligible_nodes("Site")
    assert sorted(sites) == ["S1", "S2", "S3"]
    assert sites["S3"] == {"Country": "fr", "Site": "S3"}
    assert res.get_eligible_nodes("Site", ce_select={"Platform": "el9"}) == {
        "S1": res.get_eligible_nodes("Site")["S1"]
    }
    assert res.get_eligible_nodes("Site", queue_select={"CPUTime": 86400}).keys() == {"S1", "S2"}
    assert res.get_eligible_nodes("Site", queue_select={"Missing": 1}) == {}


def test_eligible_nodes_bad_level() -> None:
    with pytest.raises(InvalidInput, match="level"):
        Resources(GRID).get_eligible_nodes("Host")
