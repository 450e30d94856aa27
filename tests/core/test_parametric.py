"""DIRAC parametric jobs (wms/core/parametric.py): every row of examples.md J3,
through parse_jdl and through expand(), plus the refusals and the bound."""

from __future__ import annotations

import pytest

from wms.core.classad import Expression
from wms.core.errors import JDLError
from wms.core.jdl import parse_jdl
from wms.core.parametric import MAX_JOBS, expand, format_value, is_parametric

EXE = 'Executable = "run.sh"; '

# examples.md J3: (JDL without Executable, [(Arguments, JobName, Parameter, ParameterNumber), ...])
J3_ROWS = [
    (
        'Arguments = "%s"; JobName = "Test_%n"; Parameters = {"a","b","c"};',
        [("a", "Test_0", "a", 0), ("b", "Test_1", "b", 1), ("c", "Test_2", "c", 2)],
    ),
    (
        'Arguments = "%s"; JobName = "Test_%n"; Parameters = 3;',
        [("1", "Test_0", 1, 0), ("1", "Test_1", 1, 1), ("1", "Test_2", 1, 2)],
    ),
    (
        'Arguments = "%s"; JobName = "Test_%n"; Parameters = 3; ParameterStart = 5;',
        [("5", "Test_0", 5, 0), ("5", "Test_1", 5, 1), ("5", "Test_2", 5, 2)],
    ),
    (
        'Arguments = "%s"; JobName = "Test_%n"; Parameters = 3; ParameterStart = 1; '
        "ParameterStep = 1; ParameterFactor = 2;",
        [("1", "Test_0", 1, 0), ("3", "Test_1", 3, 1), ("7", "Test_2", 7, 2)],
    ),
    (
        'Arguments = "%s"; JobName = "Test_%n"; Parameters = 4; ParameterStart = 0.; ParameterStep = 0.1;',
        [("0.0", "Test_0", 0.0, 0), ("0.1", "Test_1", 0.1, 1), ("0.2", "Test_2", 0.2, 2), ("0.3", "Test_3", 0.3, 3)],
    ),
]


@pytest.mark.parametrize(("jdl", "expected"), J3_ROWS)
def test_j3_sequences(jdl: str, expected: list[tuple[str, str, object, int]]) -> None:
    jobs = parse_jdl(EXE + jdl, "p.jdl")
    assert [(j.arguments, j.job_name, j.get("Parameter"), j.get("ParameterNumber")) for j in jobs] == expected
    for job in jobs:
        assert type(job.get("Parameter")) is type(expected[0][2])
        assert not any(key.lower().startswith("parameters") for key in job.attributes)
        assert job.get("ParameterStart") is None and job.get("ParameterStep") is None


def test_j3_named_sequences() -> None:
    jobs = parse_jdl(
        EXE + 'Arguments = "%(A)s %(B)s"; Parameters = 3; ParameterStart.A = 1; ParameterStep.A = 1; '
        'ParameterFactor.A = 2; Parameters.B = {"a","b","c"};',
        "p.jdl",
    )
    assert [j.arguments for j in jobs] == ["1 a", "3 b", "7 c"]
    assert [(j.get("Parameter.A"), j.get("parameter.b"), j.get("Parameter")) for j in jobs] == [
        (1, "a", 1), (3, "b", 1), (7, "c", 1),
    ]
    assert all(len(j.attributes) == 6 for j in jobs)  # Executable, Arguments, Parameter, .A, .B, Number


def test_j3_different_lengths_are_refused() -> None:
    text = (
        EXE + 'Arguments = "%(A)s %(B)s"; Parameters = 3; ParameterStart.A = 1; ParameterStep.A = 1;\n'
        'ParameterFactor.A = 2; Parameters.B = {"a","b","c","d"};'
    )
    with pytest.raises(JDLError) as info:
        parse_jdl(text, "p.jdl")
    assert str(info.value) == "p.jdl:2:24: Different length of parameter vectors: for Parameters.B, 3 != 4"


def test_j3_zero_parameters_is_refused() -> None:
    with pytest.raises(JDLError) as info:
        parse_jdl(EXE + "\nParameters = 0;", "p.jdl")
    assert str(info.value) == "p.jdl:2:1: Illegal number of job parameters 0"


def test_j3_index_padding() -> None:
    jobs = parse_jdl(EXE + 'JobName = "J%n"; Arguments = "%s"; Parameters = 11; ParameterStart = 0; ParameterStep = 1;')
    assert [j.job_name for j in jobs] == [f"J{i:02d}" for i in range(11)]
    assert [j.arguments for j in jobs] == [str(i) for i in range(11)]
    assert [j.get("Parameter") for j in jobs] == list(range(11))


def test_j3_placeholders_in_lists_and_start_ignored_for_a_list() -> None:
    jobs = parse_jdl(EXE + 'InputSandbox = {"in_%s.dat", "common.sh"}; Parameters = {"x","y"}; ParameterStart = 7;')
    assert [j.input_sandbox for j in jobs] == [["in_x.dat", "common.sh"], ["in_y.dat", "common.sh"]]
    assert [j.get("Parameter") for j in jobs] == ["x", "y"]


def test_interface_parameters_10() -> None:
    jobs = parse_jdl(EXE + 'JobName = "hello_%n"; Parameters = 10;')
    assert len(jobs) == 10
    assert [j.job_name for j in jobs] == [f"hello_{i}" for i in range(10)]


def test_dirac_contrast_of_j5() -> None:
    # examples.md J5 contrast: in DIRAC these three lines give 10 jobs, 2, 5, ..., 29
    jobs = parse_jdl(EXE + 'Arguments = "%s"; Parameters = 10; ParameterStart = 2; ParameterStep = 3;')
    assert [j.arguments for j in jobs] == [str(2 + 3 * i) for i in range(10)]


# -- expand() on plain attributes ----------------------------------------------------


def test_expand_without_parameters_returns_one_copy() -> None:
    attributes = {"Executable": "x", "Arguments": "%s %n", "ParameterStart": 3}
    jobs = expand(attributes)
    assert jobs == [attributes] and jobs[0] is not attributes
    assert not is_parametric(attributes)


def test_expand_substitutes_in_nested_records_and_expression_strings() -> None:
    jobs = expand(
        {
            "Executable": "x",
            "Requirements": {"Tag": ["v_%s"], "Nested": {"Name": "n%n"}},
            "Rank": Expression('other.Name == "node_%s" ? 1 : 0'),
            "Count": 5,
            "Parameters": ['say "hi"', "b"],
        }
    )
    assert jobs[0]["Requirements"] == {"Tag": ['v_say "hi"'], "Nested": {"Name": "n0"}}
    assert jobs[0]["Rank"] == Expression('other.Name == "node_say \\"hi\\"" ? 1 : 0')
    assert jobs[1]["Rank"] == Expression('other.Name == "node_b" ? 1 : 0')
    assert jobs[1]["Count"] == 5


def test_placeholders_are_case_insensitive_and_not_substituted_twice() -> None:
    jobs = expand({"Arguments": "%(a)s %s", "Parameters": ["%n", "%(A)s"], "Parameters.A": ["p", "q"]})
    assert [j["Arguments"] for j in jobs] == ["p %n", "q %(A)s"]


def test_parameter_attributes_are_replaced() -> None:
    jobs = expand({"Parameter": "old", "parameternumber": 9, "Parameters": 1})
    assert jobs == [{"Parameter": 1, "ParameterNumber": 0}]


def test_float_values_are_formatted_cleanly() -> None:
    assert format_value(0.1 * 3) == "0.3"
    assert format_value(1e-5) == "1e-05"
    assert format_value(True) == "true"
    jobs = expand({"A": "%s", "Parameters": 3, "ParameterStart": 0.1, "ParameterFactor": 3})
    assert [j["A"] for j in jobs] == ["0.1", "0.3", "0.9"]


def test_named_sequence_alone() -> None:
    jobs = expand({"A": "%(X)s-%n", "Parameters.X": 2, "ParameterStart.X": 10, "ParameterStep.X": 5})
    assert [(j["A"], j["Parameter.X"]) for j in jobs] == [("10-0", 10), ("15-1", 15)]
    assert "Parameter" not in jobs[0]


REFUSALS = [
    ({"Parameters": -2}, "Illegal number of job parameters -2"),
    ({"Parameters": []}, "Illegal number of job parameters 0"),
    ({"Parameters": "many"}, 'Parameters: expected a list of values or a number of jobs, got "many"'),
    ({"Parameters": [["a"]]}, 'Parameters: a parameter value must be a string or a number, got {"a"}'),
    ({"Parameters": 2, "ParameterStep": "x"}, 'ParameterStep: expected a number, got "x"'),
    ({"A": "%(Z)s", "Parameters": 2}, "A: unknown parameter sequence 'Z' in %(Z)s"),
    ({"A": "%s", "Parameters.B": 2}, "A: uses %s but the JDL has no unnamed Parameters"),
    ({"Parameters.B": 2, "ParameterStart.C": 1}, "ParameterStart.C: needs Parameters.C or Parameters to give the number of values"),
    ({"Parameters.A": [1, 2], "Parameters.B": [1]}, "Different length of parameter vectors: for Parameters.B, 2 != 1"),
    (
        {"Parameters": MAX_JOBS + 1},
        f"Parameters: too many jobs from one parametric JDL: {MAX_JOBS + 1} > {MAX_JOBS} (the limit)",
    ),
    (
        {"Parameters": 100, "ParameterStart": 1, "ParameterFactor": 10},
        "Parameters: parameter value number 19 is out of range (more than 1e+18 in absolute value)",
    ),
]


@pytest.mark.parametrize(("attributes", "message"), REFUSALS)
def test_refusals(attributes: dict, message: str) -> None:
    with pytest.raises(JDLError) as info:
        expand(attributes)
    assert str(info.value) == message


def test_refusal_positions_through_parse_jdl() -> None:
    with pytest.raises(JDLError) as info:
        parse_jdl('[\n  Executable = "x";\n  Arguments = "%(Q)s";\n  Parameters = 2;\n]', "p.jdl")
    assert str(info.value) == "p.jdl:3:3: Arguments: unknown parameter sequence 'Q' in %(Q)s"
    with pytest.raises(JDLError) as info:
        parse_jdl(f'Executable = "x";\n  Parameters = {MAX_JOBS * 2};', "p.jdl")
    assert str(info.value).startswith("p.jdl:2:3: Parameters: too many jobs from one parametric JDL")


def test_the_bound_is_reachable() -> None:
    jobs = expand({"A": "%n", "Parameters": MAX_JOBS})
    assert len(jobs) == MAX_JOBS
    assert jobs[-1]["A"] == str(MAX_JOBS - 1) and jobs[0]["A"] == "00000"
