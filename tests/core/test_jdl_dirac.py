"""JDLs as DIRAC users write them (DIRAC's tutorials and documentation):
every attribute of DIRAC's job description is read with DIRAC's meaning,
or refused, naming it, where this system deliberately does not support it
(wms/core/jdl.py; docs/jdl.md)."""

from __future__ import annotations

import pytest

from tests.core.test_optimizers import queue_names, run
from wms.core.errors import JDLError
from wms.core.jdl import parse_jdl

# DIRAC's tutorial, Simple.jdl: no enclosing brackets.
SIMPLE = """\
JobName = "Simple_Job";
Executable = "/bin/ls";
Arguments = "-ltr";
StdOutput = "StdOut";
StdError = "StdErr";
OutputSandbox = {"StdOut","StdErr"};
"""
# The tutorial's sandbox job: the script travels in the input sandbox.
SANDBOX = """\
JobName = "InputAndOuputSandbox";
Executable = "testJob.sh";
StdOutput = "StdOut";
StdError = "StdErr";
InputSandbox = {"testJob.sh"};
OutputSandbox = {"StdOut","StdErr"};
"""
# The documentation's parametric job.
PARAMETRIC = """\
Executable = "testJob.sh";
JobName = "%n_parametric";
Arguments = "%s";
Parameters = {"first","second","third"};
StdOutput = "StdOut";
StdError = "StdErr";
InputSandbox = {"testJob.sh"};
OutputSandbox = {"StdOut","StdErr"};
"""
# A production portal's template: the job's scheduling keywords and labels.
PORTAL = """\
JobName = "prod_0001";
JobGroup = "MyProduction";
JobType = "User";
LogLevel = "DEBUG";
Executable = "run.sh";
Arguments = "--events 100";
CPUTime = 3600;
Priority = 1;
Site = {"LCG.CERN.ch", "LCG.IN2P3.fr"};
BannedSites = "LCG.RAL.uk";
Platform = "x86_64-el9";
Tags = "MultiProcessor";
InputSandbox = {"run.sh"};
InputData = {"/lhcb/user/r/roland/input.dst"};
OutputSandbox = {"*.log", "StdOut"};
StdOutput = "StdOut";
"""


def one(text: str):
    [description] = parse_jdl(text, "dirac.jdl")
    return description


def test_the_tutorials_simple_jdl_names_its_streams():
    job = one(SIMPLE)
    assert (job.executable, job.arguments, job.job_name) == ("/bin/ls", "-ltr", "Simple_Job")
    assert (job.std_output, job.std_error, job.output_sandbox) == ("StdOut", "StdErr", ["StdOut", "StdErr"])


def test_the_sandbox_script_is_the_executable():
    job = one(SANDBOX)
    assert (job.executable, job.input_sandbox) == ("testJob.sh", ["testJob.sh"])


def test_the_parametric_job_is_three_jobs():
    jobs = parse_jdl(PARAMETRIC, "dirac.jdl")
    assert [(j.job_name, j.arguments, j.std_output) for j in jobs] == [
        ("0_parametric", "first", "StdOut"), ("1_parametric", "second", "StdOut"), ("2_parametric", "third", "StdOut")]


def test_the_portals_template_keeps_dirac_s_meaning():
    job = one(PORTAL)
    assert job.get("JobGroup") == "MyProduction" and job.get("LogLevel") == "DEBUG"     # labels, kept
    assert (job.cpu_time, job.priority, job.platforms) == (3600, 1, ["x86_64-el9"])
    assert (job.sites, job.banned_sites, job.tags) == (["LCG.CERN.ch", "LCG.IN2P3.fr"], ["LCG.RAL.uk"],
                                                        ["MultiProcessor"])
    assert job.input_data == ["LFN:/lhcb/user/r/roland/input.dst"]
    placed = run(PORTAL)
    # The MultiProcessor queues of the sites it names: CERN's gpu and IN2P3's mc.
    assert queue_names(placed) == ["LCG.CERN.ch/gpu01.cern.ch/gpu", "LCG.IN2P3.fr/cccondorce01.in2p3.fr/mc"]


@pytest.mark.parametrize(("tags", "expected"), [('"GPU"', ["GPU"]), ('{"GPU", "8Processors"}', ["GPU", "8Processors"])])
def test_tags_are_a_string_or_a_list(tags, expected):
    assert one(f'Executable = "x"; Tags = {tags};').tags == expected


@pytest.mark.parametrize(("attributes", "processors"), [
    ("NumberOfProcessors = 4;", 4),
    ("MinNumberOfProcessors = 4;", 4),
    ("MinNumberOfProcessors = 2; MaxNumberOfProcessors = 8;", 2),
    ("MaxNumberOfProcessors = 8;", 1),
    ("NumberOfProcessors = 4; MinNumberOfProcessors = 2; MaxNumberOfProcessors = 8;", 4),
])
def test_a_processor_range_gives_the_job_the_least_it_runs_with(attributes, processors):
    assert one(f'Executable = "x"; {attributes}').number_of_processors == processors


def test_whole_node_asks_for_a_queue_tagged_whole_node():
    job = run('Executable = "x"; CPUTime = 3600; WholeNode = "yes";')
    assert job.description.tags == ["WholeNode"]
    assert queue_names(job) == ["LCG.IN2P3.fr/cccondorce01.in2p3.fr/mc"]
    assert one('Executable = "x"; WholeNode = false;').tags == []


def test_execution_environment_sets_the_payloads_variables():
    job = one('Executable = "x"; ExecutionEnvironment = {"MYVAR=1", "EMPTY=", "EQ=a=b"};')
    assert job.environment == {"MYVAR": "1", "EMPTY": "", "EQ": "a=b"}
    assert one('Executable = "x"; ExecutionEnvironment = "ONE=1";').environment == {"ONE": "1"}


@pytest.mark.parametrize(("attribute", "message"), [
    ('OutputData = {"out.root"};', "dirac.jdl:1:19: OutputData: not supported: there are no storage elements or "
                                   "file catalogue here: name the files in OutputSandbox"),
    ('OutputSE = "CERN-USER";', "dirac.jdl:1:19: OutputSE: not supported: there are no storage elements here"),
    ('OutputPath = "/lhcb/user/r";', "dirac.jdl:1:19: OutputPath: not supported"),
    ('InputDataPolicy = "Download";', "dirac.jdl:1:19: InputDataPolicy: not supported"),
    ('GridCE = "ce01.cern.ch";', "dirac.jdl:1:19: GridCE: not supported"),
    ('SubmitPools = {"pool1"};', "dirac.jdl:1:19: SubmitPools: not supported: the SubmitPool is computed"),
    ("MinNumberOfProcessors = 8; MaxNumberOfProcessors = 4;",
     "dirac.jdl:1:19: MinNumberOfProcessors: 8 is more than MaxNumberOfProcessors (4)"),
    ("NumberOfProcessors = 2; MinNumberOfProcessors = 4;",
     "dirac.jdl:1:19: NumberOfProcessors: 2 is less than MinNumberOfProcessors (4)"),
    ("NumberOfProcessors = 9; MaxNumberOfProcessors = 8;",
     "dirac.jdl:1:19: NumberOfProcessors: 9 is more than MaxNumberOfProcessors (8)"),
    ("WholeNode = 3;", "dirac.jdl:1:19: WholeNode: expected true or false, got 3"),
    ('ExecutionEnvironment = {"NOVALUE"};', "dirac.jdl:1:19: ExecutionEnvironment: expected NAME=value, got "
                                            '"NOVALUE"'),
    ('ExecutionEnvironment = {"WMS_JOB_ID=7"};', "dirac.jdl:1:19: ExecutionEnvironment: WMS_JOB_ID: names beginning "
                                                "WMS_ are set by the system"),
    ('StdOutput = "logs/out";', "dirac.jdl:1:19: StdOutput: a file of the job's directory: 'logs/out' is not a "
                                "plain file name"),
])
def test_what_is_deliberately_not_supported_is_refused_naming_the_attribute(attribute, message):
    with pytest.raises(JDLError) as refused:
        parse_jdl(f'Executable = "x"; {attribute}', "dirac.jdl")
    assert str(refused.value).startswith(message), str(refused.value)
