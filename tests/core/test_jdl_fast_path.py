"""The fast ways of reading a JDL give what the general way gives.

wms/core/classad.py tokenizes with one regex, and wms/core/jdl.py reads JDLs
of plain literals with a few regexes (``_read_plain``) instead of the
tokenizer and the checker; these tests pin down that both change nothing a
caller can see (values, key order, positions, error messages).
"""

from __future__ import annotations

import time

import pytest

from wms.core import classad, jdl
from wms.core.classad import ClassAdSyntaxError
from wms.core.errors import JDLError

# --------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in classad.tokenize(text)]


def test_a_dot_before_digits_is_a_number_only_where_no_value_ends() -> None:
    assert _kinds("x = .5") == [("ident", "x"), ("punct", "="), ("number", ".5")]
    assert _kinds("a.5") == [("ident", "a"), ("op", "."), ("number", "5")]
    # after the operator dot the digits are read as a number from scratch
    assert _kinds("a.5.3") == [("ident", "a"), ("op", "."), ("number", "5.3")]
    assert _kinds("(1).5e3") == [("punct", "("), ("number", "1"), ("punct", ")"), ("op", "."), ("number", "5e3")]


def test_operators_and_assignment() -> None:
    assert [t.text for t in classad.tokenize("a =?= b =!= c == d = e >>> f")] == [
        "a", "=?=", "b", "=!=", "c", "==", "d", "=", "e", ">>>", "f",
    ]
    assert _kinds("a=?b")[1] == ("punct", "=")


def test_strings_escapes_and_positions_over_lines() -> None:
    tokens = classad.tokenize('[\n  a = "x\\"y";\r\n\tb = \'n\\\'m\' /* c\n c */ c\n]')
    assert [(t.kind, t.text, t.line, t.col, t.start, t.end) for t in tokens][2:5] == [
        ("punct", "=", 2, 5, 6, 7),
        ("string", '"x\\"y"', 2, 7, 8, 14),
        ("punct", ";", 2, 13, 14, 15),
    ]
    assert [(t.text, t.line, t.col) for t in tokens[5:]] == [
        ("b", 3, 2), ("=", 3, 4), ("'n\\'m'", 3, 6), ("c", 4, 7), ("]", 5, 1),
    ]


@pytest.mark.parametrize(
    ("text", "message", "line", "col"),
    [
        ('a = 1;\n  b = "open', "unterminated string", 2, 7),
        ('a = "ends with a backslash\\', "unterminated string", 1, 5),
        ('a = "no newline \\\n"', "unterminated string", 1, 5),
        ("a = 'open", "unterminated quoted attribute name", 1, 5),
        ("a = 1 /* x\n */ b = 2 /* open\n", "unterminated comment: '/*' without '*/'", 2, 11),
        ("a = /*/ 1", "unterminated comment: '/*' without '*/'", 1, 5),
        ("a =\n  12ab", "malformed number '12ab'", 2, 3),
        ("a = 1e", "malformed number '1e'", 1, 5),
        ("a = 1.5x.y", "malformed number '1.5x.y'", 1, 5),
        ("a = .5_", "malformed number '.5_'", 1, 5),
        ("a = 1\u00e9", "malformed number '1'", 1, 5),
        ("a = 1 @ 2", "unexpected character '@'", 1, 7),
        ("a = \u00a0", "unexpected character '\\xa0'", 1, 5),
        # a non-ASCII digit (the old tokenizer failed an assert on it)
        ("a = \u0663", "unexpected character '\u0663'", 1, 5),
    ],
)
def test_tokenize_errors(text: str, message: str, line: int, col: int) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        classad.tokenize(text)
    assert (info.value.message, info.value.line, info.value.col) == (message, line, col)


def test_hash_comments_only_when_asked() -> None:
    assert [t.text for t in classad.tokenize("a # b\nc", hash_comments=True)] == ["a", "c"]
    assert [t.text for t in classad.tokenize("a // b # c\nd")] == ["a", "d"]


def test_tokenize_is_linear_on_bad_input() -> None:
    texts = [
        '"' + "a\\b" * 20_000,  # unterminated string full of escapes
        "/*" + " *" * 20_000,  # unterminated comment
        "a" + " " * 50_000,  # blanks up to the end
        "a" + " \n\t" * 20_000 + "@",
    ]
    # CPU time of this process, not wall time: a loaded machine may give
    # the test a fraction of a core, but a quadratic tokenizer would still
    # spend far more CPU than 2 s on these inputs.
    started = time.process_time()
    for text in texts:
        try:
            classad.tokenize(text)
        except ClassAdSyntaxError:
            pass
    assert time.process_time() - started < 2.0


def test_parse_checked_record_is_the_end_of_parse_record() -> None:
    text = '[ b = 1; A = [ y = {1, "x"}; x = other.Z > 2 ]; c = "s" ]'
    order = {"b": (0, None), "a": (1, {"y": (0, None), "x": (1, None)}), "c": (2, None)}
    record = classad.parse_checked_record(text, order)
    assert record == classad.parse_record(text)
    assert list(record) == ["b", "A", "c"] and list(record["A"]) == ["y", "x"]
    with pytest.raises(ClassAdSyntaxError):
        classad.parse_checked_record("[ a = ; ]", {"a": (0, None)})


# --------------------------------------------------------------------------
# JDLs of plain literals
# --------------------------------------------------------------------------

PLAIN = [
    '[ Executable = "/bin/sh"; Arguments = "-c \'echo 1\'"; JobName = "plain_1"; CPUTime = 3600; ]',
    '[ Executable = "/bin/sh"; JobName = "sw_1"; Requirements = [ SoftwareTag = {"AppVersion1"}; ]; ]',
    '[ Executable = "/bin/sh"; JobName = "mem_1"; CPUTime = 20000; Requirements = [ Memory = 2000; ]; ]',
    '[ Executable = "/bin/sh"; JobName = "site_1"; Site = {"LCG.CERN.ch"}; Platform = "x86_64-el9"; ]',
    '[ Executable = "/bin/sh"; JobName = "req_1"; '
    'Requirements = [ SoftwareTag = {"AppVersion2","AppVersion1"}; MaxRAM = 4000; ]; ]',
    '\n[\n  executable="x"  ;\r\n\tPriority = -3;\n  Tags = { };  Flag = true;\n  Ref = Other\n]\n\n',
    '[ Executable = "a\\"b\\\\c"; Owner = "o"; Parameters = {"x", "y"}; Arguments = "%s-%n" ]',
    '[ Executable = "x"; ResourceRequests = [ h_rt = "1:00:00"; slots = 2; mem = 1.5 ]; R = []; ]',
    '[ Executable = "x"; NumberOfProcessors = 0; ]',  # refused later, with its position
    '[ Executable = "x";\n  CPUTime = "soon";\n]',
]

# Plain, but classad2 refuses them: the general way reports the error.
REFUSED = [
    '[ Executable = "x"; Weird = is; ]',
    '[ Executable = "x"; true = 1; ]',
]

GENERAL = [
    'Executable = "/bin/sh"; JobName = "no brackets";',
    '[ Executable = "/bin/sh"; // a comment\n JobName = "c"; ]',
    '[ Executable = "/bin/sh"; # a comment\n JobName = "c"; ]',
    '[ Executable = "x"; CPUTime = 1.; ]',
    '[ Executable = "x"; Requirements = other.Memory > 2000; ]',
    '[ Executable = "x"; ParameterStart.A = 1; Parameters.A = 2; Arguments = "%(A)s" ]',
    "[ Executable = \"x\"; 'quoted name' = 1; ]",
    '[ Executable = "x"; R = [ S = [ T = 1 ] ]; ]',
    '[ Executable = "x"; L = { [ a = 1 ] }; ]',
    '[ Executable = "x";; JobName = "y" ]',
    '[ Executable = "x"; executable = "y"; ]',
    '[ Executable = "x"; R = [ a = 1; A = 2 ]; ]',
    "[ ]",
    '[ Executable = "x"; ] trailing',
    '[ Executable = "x"; L = {"a" "b"}; ]',
    '[ Executable = "x"; N = - 5; M = -5; ]',
]


def _outcome(text: str) -> object:
    try:
        return [(job.attributes, list(job.attributes), job) for job in jdl.parse_jdl(text, "f.jdl")]
    except JDLError as exc:
        return (str(exc), exc.where)


@pytest.mark.parametrize("text", PLAIN)
def test_plain_jdls_take_the_fast_way(text: str) -> None:
    assert jdl._read_plain(text) is not None


@pytest.mark.parametrize("text", GENERAL + REFUSED)
def test_other_jdls_take_the_general_way(text: str) -> None:
    assert jdl._read_plain(text) is None


@pytest.mark.parametrize("text", PLAIN + GENERAL + REFUSED)
def test_the_fast_way_changes_nothing(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _outcome(text)
    fast_read = jdl._read_plain(text)
    monkeypatch.setattr(jdl, "_read_plain", lambda text: None)
    assert _outcome(text) == fast
    if fast_read is not None:
        assert jdl._read(text, "f.jdl") == fast_read


def test_positions_from_the_fast_way() -> None:
    text = '[\n  Executable = "x";\n\n    CPUTime = "soon";\n]'
    assert jdl._read_plain(text) is not None
    with pytest.raises(JDLError) as info:
        jdl.parse_jdl(text, "f.jdl")
    assert info.value.where == "f.jdl:4:5"
