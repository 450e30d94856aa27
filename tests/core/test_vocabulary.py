"""Names a Requirements expression reads from the resource, checked against
the names some resource describes (wms/core/vocabulary.py)."""

from __future__ import annotations

import pytest

from wms.core.vocabulary import Vocabulary, target_names, unknown_names

KNOWN = Vocabulary.of(["Memory", "MaxRAM", "CPUTime", "SoftwareTag", "Platform"], ["mem_free", "arch"],
                      ["Host", "CPUTimeLeft"])


@pytest.mark.parametrize(("expression", "messages"), [
    ("other.Memory >= 1000", []),
    ("other.memory >= 1000 && TARGET.cputime > 10", []),                 # names ignore case
    ("other.Memroy >= 1000", ["other.Memroy: no resource describes Memroy; did you mean Memory?"]),
    ("target.CPUTiem > 10", ["other.CPUTiem: no resource describes CPUTiem; did you mean CPUTime?"]),
    ("Memroy >= 1000", ["Memroy: neither the job nor any resource describes Memroy; did you mean Memory?"]),
    ("other.Flavour == \"gold\"", ["other.Flavour: no resource describes Flavour (names a VO's pilots publish "
                                   "are declared in operations.yaml JobDescription.PilotAttributes)"]),
    ("other.Memory >= MinMem", []),                                         # the job's own attribute
    ("other.Memory >= my.MinMem", []),
    ("other.CPUTimeLeft > 3600 && other.Host != \"bad\"", []),             # what pilots describe
])
def test_unknown_names_are_named_with_the_closest_known_one(expression, messages):
    assert unknown_names(expression, {"MinMem": 2000, "Executable": "x"}, KNOWN) == messages


def test_target_names_are_the_other_references_and_the_unscoped_names_the_job_lacks():
    assert target_names("other.A > B && my.C > D && E", {"D": 1, "e": 2}) == [("A", True), ("B", False)]


def test_the_closest_name_must_be_close():
    assert KNOWN.closest("Memroy") == "Memory"
    assert KNOWN.closest("Zebra") is None
