"""wms.core.limits: the pre-scan, the character checks, ids and UTF-8."""

from __future__ import annotations

import pytest

from wms.core import classad, jdl, limits
from wms.core.errors import InvalidInput, JDLError, TooLarge


def scan(text: str, **bounds) -> None:
    limits.scan_classad(text, "f.jdl", limits.Limits(**bounds))


def test_a_text_within_the_limits_passes() -> None:
    scan('[ Executable = "x"; Requirements = other.A > 1 && other.B < 2; Tags = {"a", "b"} ]')


@pytest.mark.parametrize("text, where", [
    ("[ a = " * 5 + "1" + " ]" * 5, "f.jdl:1:25"),
    ('[\n  Tags = {{{{{"a"}}}}}\n]', "f.jdl:2:13"),
    ("[ R = ((((((1)))))) ]", "f.jdl:1:10"),
])
def test_nesting_deeper_than_the_limit_is_refused_where_it_happens(text: str, where: str) -> None:
    with pytest.raises(JDLError, match="nested too deep: more than 4 levels") as info:
        scan(text, depth=4)
    assert info.value.where == where


def test_brackets_inside_strings_and_comments_do_not_count() -> None:
    scan('[ A = "((((((((((((("; /* [[[[[[[[[[[[ */ B = 1 // {{{{{{{{{{{\n # ((((((((((\n ]', depth=2)


def test_operators_along_one_expression_are_bounded() -> None:
    text = "[ R = " + " && ".join(["x"] * 10) + " ]"
    scan(text, expression_terms=9)
    with pytest.raises(JDLError, match=r"expression too long: more than 8 operators .*limits.expression_terms"):
        scan(text, expression_terms=8)


def test_operators_of_separate_attributes_and_list_items_are_not_added_up() -> None:
    scan("[ A = 1 + 2 + 3; B = 1 + 2 + 3; C = {1 + 2 + 3, 1 + 2 + 3} ]", expression_terms=3)


def test_operators_around_a_group_count_with_it() -> None:
    with pytest.raises(JDLError, match="expression too long"):
        scan("[ A = 1 + 2 + (3 + 4 + 5) ]", expression_terms=3)


def test_the_ceiling_holds_whatever_the_configuration_says() -> None:
    too_deep = "[ a = " + "(" * (limits.CEILING.depth + 1) + "1" + ")" * (limits.CEILING.depth + 1) + " ]"
    with pytest.raises(JDLError, match=f"more than {limits.CEILING.depth} levels"):
        scan(too_deep, depth=10_000)


def test_a_text_larger_than_jdl_bytes_is_too_large() -> None:
    with pytest.raises(TooLarge, match=r"JDL too large: more than 100 bytes \(limits.jdl_bytes\)") as info:
        scan('[ A = "' + "é" * 60 + '" ]', jdl_bytes=100)  # 60 characters, 120 bytes
    assert info.value.status == 413


@pytest.mark.parametrize("text, message", [
    ('[\n  A = "a\x00b"\n]', "f.jdl:2:9: NUL character (U+0000) is not allowed"),
    ('[ A = "\udfff" ]', "f.jdl:1:8: lone surrogate U+DFFF (not valid Unicode text) is not allowed"),
    ("[ A = 99999999999999999999 ]", "f.jdl:1:7: number too large: more than 9223372036854775807 (64 bits)"),
    ("[ A = " + "9" * 5000 + " ]", "f.jdl:1:7: number too large: more than 9223372036854775807 (64 bits)"),
])
def test_bad_characters_and_numbers_are_refused_with_line_and_column(text: str, message: str) -> None:
    with pytest.raises(JDLError) as info:
        scan(text)
    assert str(info.value) == message


def test_a_long_number_in_a_string_or_a_name_is_fine() -> None:
    scan('[ A = "99999999999999999999"; a99999999999999999999 = 1; B = 9223372036854775807 ]')


def test_the_jdl_parser_runs_the_prescan_with_its_limits() -> None:
    with pytest.raises(JDLError, match="nested too deep"):
        jdl.parse_jdl('[ Executable = "x"; Tags = {{{"a"}}} ]', limits=limits.Limits(depth=2))


def test_the_classad_wrapper_guards_classad2() -> None:
    chain = " && ".join(["other.x > 1"] * 40_000)
    with pytest.raises(classad.ClassAdSyntaxError, match="expression too long"):
        classad.eval_bool(chain, {}, {"x": 2})
    with pytest.raises(classad.ClassAdSyntaxError, match="nested too deep"):
        classad.parse_record("[ a = " + "{" * 4000 + "}" * 4000 + " ]")


def test_parse_id() -> None:
    assert limits.parse_id("42") == 42
    assert limits.parse_id(str(limits.INT32_MAX)) == limits.INT32_MAX
    assert limits.parse_id(str(limits.INT32_MAX + 1)) is None
    assert limits.parse_id("9" * 5000) is None
    assert limits.parse_id("²") is None
    assert limits.parse_id("") is None


def test_decode_utf8_names_the_first_bad_byte() -> None:
    with pytest.raises(InvalidInput) as info:
        limits.decode_utf8(b'[\nExecutable="\xed\xa0\x80";]', "x.jdl")
    assert str(info.value) == "x.jdl:2:13: not valid UTF-8 text (byte 0xED)"
    assert limits.decode_utf8("é".encode(), "x") == "é"


def test_check_text() -> None:
    limits.check_text("fine\n", "w")
    with pytest.raises(InvalidInput, match=r"^w:2:1: NUL"):
        limits.check_text("a\n\x00", "w")
