"""ClassAd wrapper (wms/core/classad.py): examples.md 7.0 (expressions against
the SPEC 004 CE ad), J4's expression, J6 (CE-side policy), records and text."""

from __future__ import annotations


import pytest

from wms.core import classad, jdl
from wms.core.classad import ClassAdSyntaxError, Expression
from wms.core.errors import InvalidInput

# The resource ClassAd of SPEC 004 (004_21b43ebe0db7c7ef.txt), verbatim.
CE_AD_TEXT = """
[ id = "atlfarm006.mi.infn.it:2119/blah-pbs-long"; update_time = 1128351882;
expiry_time = 300; info = [ GlueCEInfoGatekeeperPort = 2119;
GlueCEStateStatus = "Production"; GlueSubClusterUniqueID = "atlfarm006.mi.infn.it";
PurchasedBy = "ism_cemon_asynch_purchaser";
GlueCESEBindGroupSEUniqueID = { "gridftp05.cern.ch" };
GlueCESEBindGroupCEUniqueID = "atlfarm006.mi.infn.it:2119/blah-pbs-long";
GlueHostArchitectureSMPSize = 2; GlueHostMainMemoryVirtualSize = 2002;
GlobusResourceContactString = "atlfarm006.mi.infn.it:2119/blah-pbs"; TTLCEinfo = 300;
GlueHostOperatingSystemVersion = "3.0.3"; QueueName = "infinite";
GlueCEStateFreeCPUs = 1; GlueCEInfoTotalCPUs = 1; LRMSType = "pbs";
GlueHostProcessorModel = "PIII"; GlueCEStateWaitingJobs = 0;
GlueSubClusterName = "atlfarm006.mi.infn.it"; GlueCEPolicyMaxWallClockTime = 172800;
GlueCESEBindSEUniqueID = "gridftp05.cern.ch"; GlueCEStateTotalJobs = 0;
GlueHostOperatingSystemRelease = "3.0.3"; GlueCEPolicyMaxCPUTime = 172800;
CEid = "atlfarm006.mi.infn.it:2119/blah-pbs-long"; GlueHostProcessorVendor = "intel";
GlueHostMainMemoryRAMSize = 1001;
AuthorizationCheck = member(other.CertificateSubject,GlueCEAccessControlBaseRule) || member(strcat("VO:",other.VirtualOrganisation), GlueCEAccessControlBaseRule);
CloseStorageElements = { [ mount = "/mn/SE2"; name = gridftp05.cern.ch ] };
GlueCEStateRunningJobs = 0; GlueCEHostingCluster = "atlfarm006.mi.infn.it";
GlueHostBenchmarkSI00 = 400; GlueClusterUniqueID = "atlfarm006.mi.infn.it";
GlueForeignKey = { "GlueClusterUniqueID=atlfarm006.mi.infn.it", "GlueCEUniqueID=atlfarm006.mi.infn.it:2119/blah-pbs-long" };
GlueCEInfoLRMSType = "pbs"; GlueCEInfoHostName = "atlfarm006.mi.infn.it";
GlueHostOperatingSystemName = "SLC"; GlueCEStateEstimatedResponseTime = 0;
GlueChunkKey = { "GlueClusterUniqueID=atlfarm006.mi.infn.it" };
GlueClusterService = { "atlfarm006.mi.infn.it" };
CloseOutputSECheck = IsUndefined(other.OutputSE) || member(other.OutputSE,GlueCESEBindGroupSEUniqueID);
GlueHostApplicationSoftwareRunTimeEnvironment = { "GLITE_1_2", "APP1", "APP2", "APP3", "APP4", "APP5" };
GlueCEInfoLRMSVersion = "Torque_1.0"; GlueClusterName = "atlfarm006.mi.infn.it";
GlueHostNetworkAdapterOutboundIP = true; GlueHostProcessorClockSpeed = 1000;
GlueCEAccessControlBaseRule = { "VO:EGEE" }; GlueCEPolicyMaxRunningJobs = 99999;
GlueHostBenchmarkSF00 = 380; GlueCEName = "infinite";
GlueHostNetworkAdapterInboundIP = false; GlueCEStateWorstResponseTime = 0;
GlueCEUniqueID = "atlfarm006.mi.infn.it:2119/blah-pbs-long";
GlueInformationServiceURL = { undefined, undefined, undefined };
GlueCEPolicyMaxTotalJobs = 999999; GlueCEPolicyPriority = 1 ] ]
"""

CE = classad.parse_record(CE_AD_TEXT)
INFO = CE["info"]  # examples.md 7.0: the Glue attributes sit inside `info`

# examples.md 7.0, RUN-CLASSAD: job expression -> value with other = the CE info ad.
CONDITIONS = [
    ("other.GlueCEPolicyMaxCPUTime > 1000", True),
    (
        "other.GlueHostBenchmarkSI00 > 500 ? other.GlueCEPolicyMaxCPUTime > 1000\n"
        "                                  : other.GlueCEPolicyMaxCPUTime > 2000",
        True,
    ),
    (
        "other.GlueHostBenchmarkSI00 > 300 ? other.GlueCEPolicyMaxCPUTime > 200000\n"
        "                                  : other.GlueCEPolicyMaxCPUTime > 2000",
        False,
    ),
    ('member("APP3", other.GlueHostApplicationSoftwareRunTimeEnvironment)', True),
    ('Member("app3", other.GlueHostApplicationSoftwareRunTimeEnvironment)', True),
    ('member("APP9", other.GlueHostApplicationSoftwareRunTimeEnvironment)', False),
    ('other.GlueCEStateStatus == "production"', True),
    ('other.GlueCEStateStatus =?= "production"', False),
    ("other.GlueHostMainMemoryRAMSize >= 2000", False),
    ('other.GlueHostMainMemoryRAMSize >= 1000 && other.GlueCEInfoLRMSType == "pbs"', True),
    ('RegExp("mi.infn.it", other.GlueCEUniqueID)', True),
    ('regexp("^atlfarm00[0-9]", other.GlueCEUniqueID)', True),
    ("other.GlueCEPolicyMaxWallClockTime > 1000 && other.NoSuchAttr > 5", None),
    ("other.NoSuchAttr > 5 || other.GlueCEStateFreeCPUs > 0", True),
    ("other.NoSuchAttr > 5 || other.GlueCEStateFreeCPUs > 5", None),
    ("other.NoSuchAttr > 5 && other.GlueCEStateFreeCPUs > 5", False),
    ("isUndefined(other.NoSuchAttr)", True),
    ("other.GlueHostNetworkAdapterOutboundIP && !other.GlueHostNetworkAdapterInboundIP", True),
]

# The ranks and what they give, in their type (=?= tells 48 from 48.0).
RANKS = [
    ("-other.GlueCEStateEstimatedResponseTime", "0"),
    ("other.GlueCEStateFreeCPUs * 10 + other.GlueCEPolicyMaxCPUTime / 3600", "58"),
    ("other.GlueCEPolicyMaxCPUTime / 3600.0", "48.0"),
]

J4_REQUIREMENTS = (
    "other.GlueCEPolicyMaxCPUTime > 1000\n"
    '  && Member("GLITE_1_2", other.GlueHostApplicationSoftwareRunTimeEnvironment)\n'
    '  && other.GlueCEStateStatus == "Production"'
)
J4_RANK = "-other.GlueCEStateEstimatedResponseTime"


def test_fixture_values_of_section_7_0() -> None:
    assert INFO["GlueCEPolicyMaxCPUTime"] == 172800
    assert INFO["GlueHostBenchmarkSI00"] == 400
    assert INFO["GlueCEStateStatus"] == "Production"
    assert INFO["GlueHostApplicationSoftwareRunTimeEnvironment"] == [
        "GLITE_1_2", "APP1", "APP2", "APP3", "APP4", "APP5",
    ]
    assert INFO["GlueHostNetworkAdapterInboundIP"] is False
    assert INFO["GlueInformationServiceURL"] == [None, None, None]
    assert isinstance(INFO["AuthorizationCheck"], Expression)
    assert INFO["CloseStorageElements"] == [{"mount": "/mn/SE2", "name": Expression("gridftp05.cern.ch")}]
    assert list(CE) == ["id", "update_time", "expiry_time", "info"]  # source order


@pytest.mark.parametrize(("expr", "expected"), CONDITIONS)
def test_section_7_0_conditions_against_the_ce_info_ad(expr: str, expected: bool | None) -> None:
    assert classad.eval_bool(expr, {}, INFO) is expected


@pytest.mark.parametrize(("expr", "_expected"), CONDITIONS)
def test_section_7_0_against_the_outer_ad_nothing_matches(expr: str, _expected: bool | None) -> None:
    # Against the OUTER SPEC 004 ad every other.Glue... is UNDEFINED.
    assert classad.eval_bool(expr, {}, CE) is not True or "NoSuchAttr" in expr


@pytest.mark.parametrize(("expr", "expected"), RANKS)
def test_section_7_0_ranks(expr: str, expected: str) -> None:
    assert classad.eval_bool(f"({expr}) =?= {expected}", {}, INFO) is True


def test_j4_requirements_and_rank() -> None:
    assert classad.eval_bool(J4_REQUIREMENTS, {}, INFO) is True
    assert classad.eval_bool(f"({J4_RANK}) =?= 0", {}, INFO) is True
    assert classad.eval_bool(J4_REQUIREMENTS, {}, CE) is None  # outer ad: UNDEFINED, no match
    assert classad.eval_bool(f"({J4_RANK}) =?= undefined", {}, CE) is True


# examples.md J6: CE-side expressions, evaluated with my = the CE info ad, other = the job.
J6 = [
    ({"VirtualOrganisation": "EGEE"}, True, True),
    ({"VirtualOrganisation": "egee"}, True, True),
    ({"VirtualOrganisation": "lhcb"}, None, True),
    ({"VirtualOrganisation": "lhcb", "CertificateSubject": "VO:EGEE"}, True, True),
    ({"CertificateSubject": "/DC=org/CN=x"}, None, True),
]
J6_OUTPUT_SE = [("gridftp05.cern.ch", True), ("GRIDFTP05.CERN.CH", True), ("se.other.org", False)]


@pytest.mark.parametrize(("job", "authorised", "close_se"), J6)
def test_j6_ce_policy(job: dict, authorised: bool | None, close_se: bool) -> None:
    assert classad.eval_bool("AuthorizationCheck", INFO, job) is authorised
    assert classad.eval_bool(INFO["AuthorizationCheck"].text, INFO, job) is authorised
    assert classad.eval_bool("CloseOutputSECheck", INFO, job) is close_se


@pytest.mark.parametrize(("output_se", "expected"), J6_OUTPUT_SE)
def test_j6_close_output_se(output_se: str, expected: bool) -> None:
    job = {"VirtualOrganisation": "EGEE", "OutputSE": output_se}
    assert classad.eval_bool(INFO["CloseOutputSECheck"].text, INFO, job) is expected


def test_other_references_work_without_a_scope() -> None:
    # classad2 gives 2 for other.X / 3600 when no scope ad is passed; we always pass one.
    assert classad.eval_bool("other.X / 3600 == 48", None, {"X": 172800}) is True
    assert classad.eval_bool("other.X / 3600 == 48") is None


def test_nested_records_in_scope_and_target() -> None:
    assert classad.eval_bool("other.info.Memory >= 2000", None, {"info": {"Memory": 4000}}) is True
    assert classad.eval_bool("my.a.b + 1 == 2", {"a": {"b": 1}}, None) is True


def test_eval_bool_conversions() -> None:
    assert classad.eval_bool("1") is True
    assert classad.eval_bool("0.0") is False
    assert classad.eval_bool('"yes"') is None  # not a condition
    assert classad.eval_bool("1 / 0") is None  # ERROR
    assert classad.eval_bool("undefined") is None
    assert classad.eval_bool("true") is True
    assert classad.eval_bool("false") is False


def test_expression_values_in_records_are_evaluated() -> None:
    my = {"limit": Expression("other.n * 2")}
    assert classad.eval_bool("limit == 42", my, {"n": 21}) is True


@pytest.mark.parametrize(
    "bad",
    ["1 +", "", "   ", "(1", "1 ) ; x = (2", '"open', "1 ] junk [", "a = 1"],
)
def test_bad_expressions_are_refused(bad: str) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        classad.eval_bool(bad)
    assert isinstance(info.value, InvalidInput)


def test_external_refs() -> None:
    assert classad.external_refs(J4_REQUIREMENTS) == [
        "GlueCEPolicyMaxCPUTime",
        "GlueCEStateStatus",
        "GlueHostApplicationSoftwareRunTimeEnvironment",
    ]
    assert classad.external_refs(J4_RANK) == ["GlueCEStateEstimatedResponseTime"]
    assert classad.external_refs("true") == []  # classad2 says [''] here
    assert classad.external_refs("my.A > 1 && B") == []  # unscoped names stay in my
    assert classad.external_refs("other.A > TARGET.a && other.info.Memory > 1 && Other.B") == ["A", "B", "info"]


def test_unscoped_names_are_read_in_the_own_ad_first_then_in_the_other() -> None:
    # HTCondor's matchmaking rule (and spec 004's CE ad, whose AuthorizationCheck reads its own list unscoped).
    job = {"MinMem": 2000}
    assert classad.eval_bool("other.Memory >= MinMem && other.Memory < 3000", job, {"Memory": 2500}) is True
    assert classad.eval_bool("other.Memory >= my.MinMem", job, {"Memory": 1500}) is False
    assert classad.eval_bool("Memory >= 2000", job, {"Memory": 2500}) is True     # not the job's: the queue's
    assert classad.eval_bool("Memory >= 2000", {"Memory": 1000}, {"Memory": 2500}) is False   # the job's own wins


def test_an_ad_may_be_given_as_its_text() -> None:
    assert classad.eval_bool("other.Memory >= MinMem", "[ MinMem = 2000 ]", {"Memory": 2500}) is True


def test_own_refs_are_the_my_and_unscoped_names() -> None:
    assert classad.own_refs("other.Memory >= MinMem && my.X > 1 && my.info.Y && TARGET.Z && minmem > 0") == [
        "info", "MinMem", "X"]
    assert classad.own_refs("other.A > 1") == []


def test_own_record_takes_what_the_expression_reads_and_what_that_reads() -> None:
    record = {"Executable": "x", "MinMem": 2000, "Limit": Expression("MinMem + Extra"), "Extra": 500,
              "Requirements": Expression("other.Memory >= Limit && Requirements")}
    assert classad.own_record("other.Memory >= limit && Memory > 1", record, leave_out=("Requirements",)) == {
        "Extra": 500, "Limit": Expression("MinMem + Extra"), "MinMem": 2000}
    assert classad.own_record("other.Memory > 1", record) == {}


def test_parse_record_types_and_order() -> None:
    record = classad.parse_record(
        """[ Zeta = 1; Alpha = "x"; F = 2.5; B = true; U = undefined; E = error;
             L = {1, "a", [ y = 1; x = 2 ]}; R = [ Z = 1; A = [ y = 1; x = 2 ] ];
             X = other.Memory >= 4000; N = -3; D = 0.; 'P.A' = 1 ]"""
    )
    assert list(record) == ["Zeta", "Alpha", "F", "B", "U", "E", "L", "R", "X", "N", "D", "P.A"]
    assert record["B"] is True and record["U"] is None
    assert record["E"] == Expression("error")
    assert record["L"][2] == {"x": 2, "y": 1}
    assert list(record["R"]) == ["Z", "A"] and list(record["R"]["A"]) == ["y", "x"]
    assert record["X"] == Expression("other.Memory >= 4000")
    assert record["N"] == -3 and record["D"] == 0.0


def _no_classad2_types(value: object) -> bool:
    if isinstance(value, dict):
        return all(_no_classad2_types(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_classad2_types(v) for v in value)
    return type(value).__module__ in ("builtins", "wms.core.classad", "datetime")


def test_no_classad2_type_leaks() -> None:
    assert _no_classad2_types(CE)
    assert _no_classad2_types(classad.parse_record("[ l = {1, [a = error], undefined}; r = [b = 2] ]"))


@pytest.mark.parametrize(
    ("text", "message", "line", "col"),
    [
        ("a = 1 ]", "a ClassAd record must start with '['", 1, 1),
        ("[ a = 1 ] junk", "unexpected text after the closing ']'", 1, 11),
        ("[ a = {1, 2 ]", "mismatched ']'", 1, 13),
        ("[ a = 1;\n  b = 1 + ]", "missing operand after '+'", 2, 9),
    ],
)
def test_parse_record_errors(text: str, message: str, line: int, col: int) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        classad.parse_record(text)
    assert info.value.message.startswith(message)
    assert (info.value.line, info.value.col) == (line, col)


def test_render_record_round_trip() -> None:
    record = {
        "Executable": "/bin/sh",
        "Arguments": "-c 'echo \"hi\"; echo \\ done'\n",
        "Count": 3,
        "Ratio": 0.1,
        "On": False,
        "Nothing": None,
        "List": ["a", 1, [2.5]],
        "Requirements": {"SoftwareTag": ["AppVersion1"], "Memory": 4000},
        "Rank": Expression("-other.GlueCEStateEstimatedResponseTime"),
        "Parameter.A": 1,
        "true": 1,
        "Unicode": "caf\u00e9",
    }
    text = classad.render_record(record)
    assert text.startswith("[\n  Executable = \"/bin/sh\";\n")
    assert "'Parameter.A' = 1;" in text and "'true' = 1;" in text
    assert classad.parse_record(text) == record


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "undefined"),
        (True, "true"),
        (3, "3"),
        (0.3, "0.3"),
        (float("inf"), 'real("INF")'),
        ('say "hi"\n', '"say \\"hi\\"\\n"'),
        (["a", 1], '{"a", 1}'),
        ({"h_rt": "1:00:00", "slots": 2}, '[ h_rt = "1:00:00"; slots = 2 ]'),
        (Expression("other.X > 1"), "other.X > 1"),
    ],
)
def test_render_value(value: object, text: str) -> None:
    assert classad.render_value(value) == text


def test_tokenize_positions_and_comments() -> None:
    tokens = classad.tokenize('a = 1; // c\n  /* x\n */ b = "s" # h\n', hash_comments=True)
    assert [(t.text, t.line, t.col) for t in tokens] == [
        ("a", 1, 1), ("=", 1, 3), ("1", 1, 5), (";", 1, 6), ("b", 3, 5), ("=", 3, 7), ('"s"', 3, 9),
    ]
    with pytest.raises(ClassAdSyntaxError) as info:
        classad.tokenize("a = 1 # no hash comments in ClassAds")
    assert (info.value.line, info.value.col) == (1, 7)


# -- the operand check: what classad2 cannot read is refused before it sees it ------

@pytest.mark.parametrize(
    ("text", "message", "col"),
    [
        ("1 +", "missing operand after '+'", 3),
        ("* 2", "missing operand before '*'", 1),
        ("1 2", "expected an operator before '2'", 3),
        ("x ? 1", "'?' without its ':'", 5),
        ("1 : 2", "':' without a '?' before it", 3),
        ("x.", "expected an attribute name after '.'", 2),
        ("x.true", "expected an attribute name after '.'", 2),
        ("()", "nothing between '(' and ')'", 1),
        ("x[]", "nothing between '[' and ']'", 2),
        ("{1, }", "expected a value after ',', got '}'", 5),
        ("f(, 1)", "expected a value before ','", 3),
        ("1 ! 2", "expected an operator before '!'", 3),
        ("x ?: !y", "'!' right after '?:': put the value in parentheses", 6),
        ("x ?: - 1", "'-' right after '?:': put the value in parentheses", 6),
        ("true(1)", "expected an operator before '('", 5),
        ("x.f(1)", "expected an operator before '('", 4),
        ("[a + 1]", "expected '=' after the attribute name a", 4),
        ("[a = 1, b = 2]", "unexpected ','", 7),
        ("[;]", "a record of nothing but ';'", 1),
        ("(1; 2)", "unexpected ';'", 3),
        ("[1 = 2]", "expected an attribute name, got '1'", 2),
        ("x = 1", "unexpected '='", 3),
    ],
)
def test_an_expression_classad2_cannot_read_is_refused_where_it_goes_wrong(text: str, message: str, col: int) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        classad.eval_bool(text)
    assert (info.value.message, info.value.col) == (message, col)


@pytest.mark.parametrize(
    "text",
    ["x ?: 3", "x ? : -1", "x ?: -2.5", "x ?: (-y)", "x ?: y ?: 3", "a ? b : c ? d : e", ".x", "- - 1", "!~1",
     "f()", "{}", "{1, 2}[0]", "[b = 1].b", "[ ; b = 1 ;; ]", "[]", "x is undefined", '"a" "b"', "x[0].y",
     "member(1, {1})", "x =?= y"],
)
def test_what_classad2_reads_passes_the_operand_check(text: str) -> None:
    classad.check_operands(classad.tokenize(text))
    classad.eval_bool(text)


def test_a_jdl_operand_mistake_is_refused_with_its_place() -> None:
    with pytest.raises(InvalidInput) as info:
        jdl.parse_one('[ Executable = "x";\n  Requirements = other.Memory >= 1 + ; ]', "f.jdl")
    assert str(info.value) == "f.jdl:2:36: missing operand after '+'"
    with pytest.raises(InvalidInput) as info:
        jdl.parse_one('Executable = "x";\nRequirements = other.Ok ? 1;', "g.jdl")     # no brackets
    assert str(info.value) == "g.jdl:2:28: '?' without its ':'"


@pytest.mark.parametrize("text, why", [
    ('absTime("\\u0000")', "year -1 is out of range"),           # a ValueError of the library's conversion
    ("random(0) >= 0", "failed to evaluate expression"),         # its ClassAdException
])
def test_a_failure_of_the_library_is_an_invalid_input_with_its_reason(text, why):
    with pytest.raises(classad.ClassAdEvalError) as caught:
        classad.eval_bool(text, where="job 3: Requirements")
    assert str(caught.value) == f"job 3: Requirements: cannot evaluate {text}: the ClassAd library failed: {why}"


def test_a_failure_of_the_library_on_a_record_names_the_attribute_and_cuts_the_text():
    with pytest.raises(classad.ClassAdValueError, match="on the value of X: year -1 is out of range$"):
        classad.parse_record('[ X = absTime("\\u0000") ]')
    long = "random(0) + " + " + ".join(["1"] * 200)
    with pytest.raises(classad.ClassAdEvalError) as caught:
        classad.eval_bool(long)
    assert len(str(caught.value)) < 200 and "..." in str(caught.value)
