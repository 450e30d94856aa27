"""JDL parsing (wms/core/jdl.py): INTERFACE.md's example, examples.md J1, J2,
J4, J7, and every refusal with its exact position."""

from __future__ import annotations

import pytest

from wms.core import classad
from wms.core.classad import Expression
from wms.core.errors import JDLError
from wms.core.jdl import JobDescription, parse_jdl, parse_one

J1 = """[
  JobName = "InputAndOutputSandbox";
  Executable = "testJob.sh";
  Arguments = "-v";
  StdOutput = "StdOut";
  StdError = "StdErr";
  InputSandbox = {"testJob.sh", "LFN:/vo.example.org/user/a/alice/input.txt"};
  InputData = {"/vo.example.org/user/a/alice/data1"};
  OutputSandbox = {"StdOut", "StdErr"};
  Site = {"LCG.CERN.ch", "LCG.RAL.uk"};
  BannedSites = {"LCG.RAL.uk"};
  CPUTime = 18000;
  Platform = "x86_64-el9";
  Tags = {"GPU"};
  NumberOfProcessors = 4;
]
"""

J2 = """[
  Executable = "my_executable";
  Requirements = [
    SoftwareTag = { "AppVersion1", "AppVersion2" };
    CPUModel = "Intel Xeon";
    Memory = 4000;
  ];
]
"""

J4 = """[
  Type = "Job";
  JobType = "Normal";
  Executable = "/bin/sh";
  Arguments = "run.sh 60";
  StdOutput = "sim.out";
  StdError = "sim.err";
  InputSandbox = {"run.sh", "gsiftp://se.example.org/data/in.tgz"};
  OutputSandbox = {"sim.out", "sim.err"};
  VirtualOrganisation = "EGEE";
  Requirements = other.GlueCEPolicyMaxCPUTime > 1000
                 && Member("GLITE_1_2", other.GlueHostApplicationSoftwareRunTimeEnvironment)
                 && other.GlueCEStateStatus == "Production";
  Rank = -other.GlueCEStateEstimatedResponseTime;
  RetryCount = 3;
  ShallowRetryCount = 0;
]
"""

INTERFACE = """[
  Executable = "/bin/sh"; Arguments = "-c 'echo hello'"; JobName = "hello";
  OwnerGroup = "lhcb_user";              // default: the token's group
  Site = {"LCG.CERN.ch"}; BannedSite = {"LCG.RAL.uk"};
  Platform = "x86_64-el9"; CPUTime = 3600; Tags = {"GPU"}; Priority = 5;
  Requirements = [ SoftwareTag = {"AppVersion1","AppVersion2"}; CPUModel = "Intel Xeon"; Memory = 4000; ];
  ResourceRequests = [ h_rt = "1:00:00"; mem_free = "2G"; compiler_lic = 1; arch = "lx*-amd64|sol*" ];
  SoftResourceRequests = [ arch = "lx-amd64" ];
  NumberOfProcessors = 4; ParallelEnvironment = "mpi"; Project = "p1";
  Reservation = 193;
  Parameters = 10;                       // parametric: 10 jobs, %n in any string
]
"""

# examples.md 7.0 fixture values used by J4 (the CE info record of SPEC 004)
CE_INFO = {
    "GlueCEPolicyMaxCPUTime": 172800,
    "GlueHostApplicationSoftwareRunTimeEnvironment": ["GLITE_1_2", "APP1", "APP2", "APP3", "APP4", "APP5"],
    "GlueCEStateStatus": "Production",
    "GlueCEStateEstimatedResponseTime": 0,
}


def _error(text: str, source: str = "job.jdl") -> str:
    with pytest.raises(JDLError) as info:
        parse_jdl(text, source)
    return str(info.value)


# -- J1 ------------------------------------------------------------------------


def test_j1_extraction() -> None:
    job = parse_one(J1, "j1.jdl")
    assert job.executable == "testJob.sh"
    assert job.arguments == "-v"
    assert job.job_name == "InputAndOutputSandbox"
    assert job.input_sandbox == ["testJob.sh", "LFN:/vo.example.org/user/a/alice/input.txt"]
    assert job.input_data == ["LFN:/vo.example.org/user/a/alice/data1"]
    assert job.output_sandbox == ["StdOut", "StdErr"]
    # extraction only: removing banned sites from Site is the optimizers' job
    assert job.sites == ["LCG.CERN.ch", "LCG.RAL.uk"]
    assert job.banned_sites == ["LCG.RAL.uk"]
    assert job.cpu_time == 18000
    assert job.platforms == ["x86_64-el9"]
    assert job.tags == ["GPU"]
    assert job.number_of_processors == 4
    assert job.requirements is None and job.requirements_expr is None
    assert job.get("stdoutput") == "StdOut"
    assert job.attributes["InputData"] == ["/vo.example.org/user/a/alice/data1"]  # as written


def test_j1_lfn_with_double_slash_is_refused() -> None:
    text = 'Executable = "x";\nInputData = {"/vo.example.org//data1"};'
    assert _error(text) == (
        "job.jdl:2:1: InputData: '//' is not allowed inside an LFN, got \"/vo.example.org//data1\""
    )


@pytest.mark.parametrize("executable", ['""', '"   "'])
def test_j1_empty_executable_is_refused(executable: str) -> None:
    assert _error(f"[\n  Arguments = \"-v\";\n  Executable = {executable};\n]") == (
        "job.jdl:3:3: Executable must not be empty"
    )


def test_j1_missing_executable_is_refused() -> None:
    assert _error('[ Arguments = "-v" ]') == (
        "job.jdl: Executable is required: the JDL has no Executable attribute"
    )


def test_banned_site_and_banned_sites_are_both_accepted() -> None:
    job = parse_one('Executable = "x"; BannedSite = "A"; BannedSites = {"B", "A"};')
    assert job.banned_sites == ["A", "B"]
    assert parse_one('Executable = "x"; Site = "LCG.CERN.ch";').sites == ["LCG.CERN.ch"]
    assert parse_one('Executable = "x"; Tag = {"a"}; Tags = "b";').tags == ["b", "a"]


# -- INTERFACE.md ----------------------------------------------------------------


def test_interface_example() -> None:
    jobs = parse_jdl(INTERFACE, "hello.jdl")
    assert len(jobs) == 10
    job = jobs[3]
    assert job.executable == "/bin/sh"
    assert job.arguments == "-c 'echo hello'"
    assert job.job_name == "hello"
    assert job.owner_group == "lhcb_user"
    assert job.sites == ["LCG.CERN.ch"] and job.banned_sites == ["LCG.RAL.uk"]
    assert job.platforms == ["x86_64-el9"] and job.cpu_time == 3600
    assert job.tags == ["GPU"] and job.priority == 5
    assert job.requirements == {
        "SoftwareTag": ["AppVersion1", "AppVersion2"],
        "CPUModel": "Intel Xeon",
        "Memory": 4000,
    }
    assert job.requirements_expr is None
    assert job.resource_requests == {
        "h_rt": "1:00:00", "mem_free": "2G", "compiler_lic": 1, "arch": "lx*-amd64|sol*",
    }
    assert job.soft_resource_requests == {"arch": "lx-amd64"}
    assert job.number_of_processors == 4
    assert job.parallel_environment == "mpi"
    assert job.project == "p1"
    assert job.reservation == 193
    assert job.get("ParameterNumber") == 3
    assert job.get("Parameters") is None


# -- J2 ------------------------------------------------------------------------


def test_j2_requirements_section_is_a_record() -> None:
    job = parse_one(J2, "j2.jdl")
    assert job.requirements == {
        "SoftwareTag": ["AppVersion1", "AppVersion2"],
        "CPUModel": "Intel Xeon",
        "Memory": 4000,
    }
    assert list(job.requirements) == ["SoftwareTag", "CPUModel", "Memory"]
    assert job.requirements_expr is None


# -- J4 ------------------------------------------------------------------------


def test_j4_requirements_expression() -> None:
    job = parse_one(J4, "j4.jdl")
    assert job.requirements is None
    assert job.requirements_expr is not None
    assert isinstance(job.get("requirements"), Expression)
    assert isinstance(job.get("RANK"), Expression)
    assert job.input_sandbox == ["run.sh", "gsiftp://se.example.org/data/in.tgz"]
    assert job.get("RetryCount") == 3
    assert classad.external_refs(job.requirements_expr) == [
        "GlueCEPolicyMaxCPUTime", "GlueCEStateStatus", "GlueHostApplicationSoftwareRunTimeEnvironment",
    ]
    assert classad.eval_bool(job.requirements_expr, job.attributes, CE_INFO) is True
    assert classad.eval_bool(f"({job.get('rank').text}) =?= 0", job.attributes, CE_INFO) is True
    # the outer SPEC 004 ad has no Glue attributes at its top level: UNDEFINED, no match
    assert classad.eval_bool(job.requirements_expr, job.attributes, {"info": CE_INFO}) is None


def test_j4_lower_case_attribute_names() -> None:
    text = J4.replace("Requirements =", "requirements =").replace("Rank =", "rank =")
    job = parse_one(text)
    assert job.requirements_expr == parse_one(J4).requirements_expr
    assert "requirements" in job.attributes and job.get("Rank") == Expression("-other.GlueCEStateEstimatedResponseTime")


def test_requirements_true_literal_is_an_expression() -> None:
    assert parse_one('Executable = "x"; Requirements = true;').requirements_expr == "true"


def test_requirements_of_the_wrong_type() -> None:
    assert _error('Executable = "x";\n  Requirements = "other.Memory > 1";') == (
        "job.jdl:2:3: Requirements: expected a record [ name = value; ... ] (RFC #7) or a ClassAd "
        'expression, got "other.Memory > 1"'
    )


# -- J7 ------------------------------------------------------------------------


def test_j7_semicolon_inside_a_string() -> None:
    job = parse_one('[ Executable = "/bin/sh"; Arguments = "-c \'echo a; echo b\'"; ]')
    assert job.arguments == "-c 'echo a; echo b'"


def test_j7_without_outer_brackets() -> None:
    bare = J1.strip()[1:-1]
    assert parse_one(bare).attributes == parse_one(J1).attributes


def test_j7_comments() -> None:
    text = """
    // a ClassAd comment
    [
      Executable = "x"; /* block
      comment */ Arguments = "a // not a comment # nor this";
      # Requirements = other.Memory > 1;   (a gLite-style comment)
      JobName = "n"; # trailing
    ]
    """
    job = parse_one(text)
    assert job.arguments == "a // not a comment # nor this"
    assert job.job_name == "n"
    assert job.requirements_expr is None


def test_j7_list_items_without_comma() -> None:
    assert _error('[\n  Executable = "x";\n  InputSandbox = {"a" "b"};\n]') == (
        "job.jdl:3:23: list items must be separated by commas (missing ',' before '\"b\"')"
    )


def test_j7_unterminated_string() -> None:
    assert _error('Executable = "x;') == "job.jdl:1:14: unterminated string"
    assert _error('[\n  Executable = "x;\n  Arguments = "y";\n]', "hello.jdl") == (
        "hello.jdl:2:16: unterminated string"
    )


def test_j7_record_versus_expression_requirements() -> None:
    record = parse_one('Executable = "x"; Requirements = [ Memory = 4000; ];')
    expression = parse_one('Executable = "x"; Requirements = other.Memory >= 4000;')
    assert record.requirements == {"Memory": 4000} and record.requirements_expr is None
    assert expression.requirements is None and expression.requirements_expr == "other.Memory >= 4000"


def test_j7_resource_requests_kept_as_given() -> None:
    job = parse_one(
        'Executable = "x"; ResourceRequests = [ h_rt = "1:00:00"; mem_free = "2G"; '
        'compiler_lic = 1; arch = "lx*-amd64|sol*" ];'
    )
    assert job.resource_requests == {
        "h_rt": "1:00:00", "mem_free": "2G", "compiler_lic": 1, "arch": "lx*-amd64|sol*",
    }


# -- refusals with their positions --------------------------------------------------

ERRORS = [
    # unbalanced / mismatched brackets
    ('[\n  Executable = "x";\n  Site = {"A", "B"];\n]', "job.jdl:3:19: mismatched ']': expected '}' to close '{' opened at 3:10"),
    ('[\n  Executable = "x";\n  Requirements = [ Memory = 4000;\n', "job.jdl:3:18: '[' is not closed"),
    ('[\n  Executable = "x";\n', "job.jdl:1:1: '[' is not closed"),
    ('Executable = "x";\nArguments = strcat("a", "b";', "job.jdl:2:28: unexpected ';' inside '(' opened at 2:19 (is a ')' missing?)"),
    ('Executable = "x";\nArguments = "a");', "job.jdl:2:16: unexpected ')' (nothing to close)"),
    ('Executable = "x";\n]', "job.jdl:2:1: unexpected ']' (no '[' to close)"),
    ('Executable = "x";\nSite = {"A",', "job.jdl:2:8: '{' is not closed"),
    # duplicates, names ignore case
    ('[\n  Requirements = true;\n  Executable = "x";\n  requirements = false;\n]',
     "job.jdl:4:3: duplicate attribute requirements (already set at 2:3; attribute names ignore case)"),
    ('Executable = "x"; Requirements = [ Memory = 1; memory = 2 ];',
     "job.jdl:1:48: duplicate attribute memory (already set at 1:36; attribute names ignore case)"),
    # junk after the closing ]
    ('[ Executable = "x"; ]\nArguments = "y";', "job.jdl:2:1: unexpected text after the closing ']': 'Arguments'"),
    # attribute without =
    ('[\n  Executable "x";\n]', "job.jdl:2:3: Executable: attribute without '=' (expected '=' after the name, got '\"x\"')"),
    ('[\n  Executable = "x";\n  Arguments;\n]', "job.jdl:3:3: Arguments: attribute without '=' (expected '=' after the name, got ';')"),
    ('Executable = "x"; Arguments', "job.jdl:1:19: Arguments: attribute without '=' (expected '=' after the name, the text ends)"),
    ('[ "Executable" = "x" ]', "job.jdl:1:3: expected an attribute name, got '\"Executable\"'"),
    ('Executable = ;', "job.jdl:1:12: Executable: missing value after '='"),
    # empty
    ("", "job.jdl: empty JDL: no attributes"),
    ("  // only a comment\n# and another\n", "job.jdl: empty JDL: no attributes"),
    ("[\n]", "job.jdl:1:1: empty JDL: no attributes"),
    # other lexical mistakes
    ('Executable = "x";\nArguments = "a" "b";', "job.jdl:2:17: two strings side by side: join them into one string or put an operator between them"),
    ('Executable = "x"\nArguments = "y";', "job.jdl:2:1: missing ';' before attribute Arguments"),
    ('Executable = "x", Arguments = "y";', "job.jdl:1:17: unexpected ',' (attributes are separated by ';', list items go inside { })"),
    ('Executable = "x"; Site = {"A",, "B"};', "job.jdl:1:31: expected a value before ','"),
    ('Executable = "x"; Site = {"A", };', "job.jdl:1:32: expected a value after ',', got '}'"),
    ('Executable = "x"; Requirements = other.Memory = 4;', "job.jdl:1:47: unexpected '=' (to compare values write '==')"),
    ('Executable = "x"; CPUTime = 0x10;', "job.jdl:1:29: malformed number '0x10'"),
    ('Executable = "x"; /* open comment', "job.jdl:1:19: unterminated comment: '/*' without '*/'"),
    ('Executable = "x"; Owner = @me;', "job.jdl:1:27: unexpected character '@'"),
    # what the checker above leaves to classad2, found before classad2 fails on it (classad.check_operands)
    ('[\n  Executable = "x";\n  CPUTime = 3600 *;\n]', "job.jdl:3:18: missing operand after '*'"),
    ('Executable = "x"; Requirements = other.Ok ? 1 : ;', "job.jdl:1:47: missing operand after ':'"),
    ('Executable = "x"; CPUTime = 0300;', "job.jdl:1:29: a whole number does not start with 0 ('0300')"),
    ('Executable = "x"; Rank = member(;', "job.jdl:1:33: unexpected ';' inside '(' opened at 1:32 (is a ')' missing?)"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_refusals_with_position(text: str, message: str) -> None:
    assert _error(text) == message


TYPE_ERRORS = [
    ('CPUTime = "abc";', 'job.jdl:3:3: CPUTime: expected a positive integer, got "abc"'),
    ("CPUTime = 0;", "job.jdl:3:3: CPUTime: expected a positive integer, got 0"),
    ("CPUTime = -5;", "job.jdl:3:3: CPUTime: expected a positive integer, got -5"),
    ("CPUTime = 1.5;", "job.jdl:3:3: CPUTime: expected a positive integer, got 1.5"),
    ("CPUTime = true;", "job.jdl:3:3: CPUTime: expected a positive integer, got true"),
    ("CPUTime = 3600 * 2;", "job.jdl:3:3: CPUTime: expected a positive integer, got 3600 * 2"),
    ('Priority = "high";', 'job.jdl:3:3: Priority: expected an integer, got "high"'),
    ("NumberOfProcessors = 0;", "job.jdl:3:3: NumberOfProcessors: expected a positive integer, got 0"),
    ('Reservation = "ar";', 'job.jdl:3:3: Reservation: expected a positive integer (an advance reservation id), got "ar"'),
    ("Site = {1, 2};", "job.jdl:3:3: Site: expected a string or a list of strings, got {1, 2}"),
    ("Platform = 9.5;", "job.jdl:3:3: Platform: expected a string or a list of strings, got 9.5"),
    ("InputSandbox = [ a = 1 ];", "job.jdl:3:3: InputSandbox: expected a string or a list of strings, got [ a = 1 ]"),
    ('Arguments = {"a"};', 'job.jdl:3:3: Arguments: expected a string, got {"a"}'),
    ("JobName = true;", "job.jdl:3:3: JobName: expected a string, got true"),
    ('ParallelEnvironment = {"mpi"};', 'job.jdl:3:3: ParallelEnvironment: expected a string, got {"mpi"}'),
    ('ResourceRequests = "h_rt=1:00:00";', 'job.jdl:3:3: ResourceRequests: expected a record [ name = value; ... ], got "h_rt=1:00:00"'),
    ('SoftResourceRequests = [ arch = {"a"} ];', 'job.jdl:3:3: SoftResourceRequests: arch: expected a string, a number or a boolean, got {"a"}'),
    ("Executable = 5; Arguments = 1;", None),  # numbers are accepted as strings
    ("Executable = {\"a\"};", 'job.jdl:3:3: Executable: expected a string, got {"a"}'),
]


@pytest.mark.parametrize(("line", "message"), TYPE_ERRORS)
def test_wrong_types_are_refused_with_the_attribute_position(line: str, message: str | None) -> None:
    executable = "" if line.startswith("Executable") else 'Executable = "x";'
    text = f"[\n  {executable}\n  {line}\n]"
    if message is None:
        job = parse_one(text)
        assert job.executable == "5" and job.arguments == "1"
    else:
        assert _error(text) == message


def test_numeric_strings_are_converted() -> None:
    job = parse_one('Executable = "x"; CPUTime = "3600"; Priority = "-2"; NumberOfProcessors = 2.0; Reservation = " 7 ";')
    assert (job.cpu_time, job.priority, job.number_of_processors, job.reservation) == (3600, -2, 2, 7)


def test_defaults() -> None:
    job = parse_one('Executable = "x";')
    assert job.priority == 0 and job.number_of_processors == 1
    assert job.cpu_time is None and job.reservation is None and job.project is None
    assert job.sites == [] and job.tags == [] and job.resource_requests == {}
    assert job.get("missing", "d") == "d"


def test_undefined_counts_as_absent() -> None:
    job = parse_one('Executable = "x"; CPUTime = undefined; Site = undefined;')
    assert job.cpu_time is None and job.sites == []


def test_dotted_names_are_accepted() -> None:
    job = parse_one('Executable = "x"; Custom.Name = 1;')
    assert job.get("custom.name") == 1


# -- text ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [J1, J2, J4])
def test_text_parses_back_to_the_same_job(text: str) -> None:
    job = parse_one(text, "j.jdl")
    again = parse_one(job.text, "again.jdl")
    assert again == job
    assert again.text == job.text


def test_parametric_job_text_parses_back() -> None:
    jobs = parse_jdl(
        'Executable = "x"; Arguments = "%(A)s"; Parameters = 2; Parameters.A = {"p", "q"};'
    )
    for job in jobs:
        again = parse_one(job.text)
        assert again == job
        assert again.get("Parameter.A") == job.get("Parameter.A")


def test_parse_one_refuses_a_parametric_jdl() -> None:
    with pytest.raises(JDLError) as info:
        parse_one('Executable = "x"; Parameters = 3;', "p.jdl")
    assert str(info.value) == "p.jdl: expected one job, but the JDL is parametric and describes 3 jobs"


def test_job_description_is_frozen() -> None:
    job = parse_one('Executable = "x";')
    assert isinstance(job, JobDescription)
    with pytest.raises(AttributeError):
        job.executable = "y"  # type: ignore[misc]


# -- overrides (wms submit -l / -soft -l / -pe / -ar / -P / -N) --------------------


def test_overrides_replace_attributes_and_merge_requests() -> None:
    jobs = parse_jdl(
        'Executable = "x"; project = "p0"; ResourceRequests = [ h_rt = "1:00:00"; mem_free = "2G" ];',
        "o.jdl",
        overrides={
            "Project": "p1",
            "ResourceRequests": {"mem_free": "4G", "arch": "lx-amd64"},
            "ParallelEnvironment": "mpi",
            "NumberOfProcessors": 8,
        },
    )
    job = jobs[0]
    assert job.project == "p1" and "project" in job.attributes
    assert job.resource_requests == {"h_rt": "1:00:00", "mem_free": "4G", "arch": "lx-amd64"}
    assert job.parallel_environment == "mpi" and job.number_of_processors == 8


def test_override_errors_have_no_position() -> None:
    with pytest.raises(JDLError) as info:
        parse_jdl('Executable = "x";\nReservation = 5;', "o.jdl", overrides={"Reservation": "abc"})
    assert str(info.value) == (
        'o.jdl: Reservation: expected a positive integer (an advance reservation id), got "abc"'
    )
