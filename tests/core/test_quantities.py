"""Memory and time specifiers (sge_types(1)): every row of examples.md
sections 3 and 4, plus booleans, numbers and the formatters."""

from __future__ import annotations

import math

import pytest

from wms.core.errors import InvalidInput
from wms.core.quantities import (
    format_memory,
    format_number,
    format_time,
    parse_bool,
    parse_memory,
    parse_number,
    parse_time,
)

ERROR = "ERROR"
INF = math.inf

# examples.md section 3 (RUN-SGE): input -> bytes
MEMORY = [
    ("100", 100),
    ("1k", 1000),
    ("1K", 1024),
    ("1m", 1000000),
    ("1M", 1048576),
    ("1g", 1000000000),
    ("1G", 1073741824),
    ("4G", 4294967296),
    ("1.5G", 1610612736),
    (".5M", 524288),
    ("1e3", 1000),
    ("1e3K", 1024000),
    ("0x10", 16),
    ("0x10K", 16384),
    ("010", 8),
    ("010K", 8192),
    ("08", ERROR),
    ("2T", ERROR),
    ("1KB", ERROR),
    ("100 ", ERROR),
    ("", ERROR),
    ("k", ERROR),
    ("-1K", -1024),
    ("infinity", INF),
    ("INFINITY", INF),
    ("true", 1),
    ("1,2", ERROR),  # the C reader stops at ","; a standalone value is refused
]

# examples.md section 4 (RUN-SGE): input -> seconds
TIME = [
    ("3600", 3600),
    ("1:0:0", 3600),
    ("1:30:00", 5400),
    ("0:0:90", 90),
    ("0:90:0", 5400),
    ("1::1", 3601),
    ("::30", 30),
    ("::", 0),
    ("48:00:00", 172800),
    ("09:00:00", 32400),
    ("1.5:0:0", 5400),
    ("2.5", 2.5),
    ("010", 8),
    ("0x10", 16),
    ("1k", 1000),
    ("2m", 2000000),
    ("1h", ERROR),
    ("1:30", ERROR),
    ("1:0:0:0", ERROR),
    ("1:0:0 ", 3600),
    ("-1:0:0", -3600),
    ("1:-5:0", 3300),
    ("infinity", INF),
]


@pytest.mark.parametrize("text, expected", MEMORY)
def test_memory_specifiers(text, expected):
    if expected == ERROR:
        with pytest.raises(InvalidInput):
            parse_memory(text)
    else:
        assert parse_memory(text) == expected


@pytest.mark.parametrize("text, expected", TIME)
def test_time_specifiers(text, expected):
    if expected == ERROR:
        with pytest.raises(InvalidInput):
            parse_time(text)
    else:
        assert parse_time(text) == expected


@pytest.mark.parametrize(
    "parse, text, message",
    [
        (parse_memory, "08", "'08' is not a memory value: a number starting with 0 is octal, and '8' is not an octal digit"),
        (parse_memory, "2T", "'2T' is not a memory value: unknown multiplier 'T' (use k, K, m, M, g or G)"),
        (parse_memory, "1KB", "'1KB' is not a memory value: unexpected 'B' after the multiplier 'K'"),
        (parse_memory, "100 ", "'100 ' is not a memory value: blanks are not allowed around the value"),
        (parse_memory, "", "'' is not a memory value: the value is empty"),
        (parse_memory, "k", "'k' is not a memory value: no number found"),
        (parse_memory, "1,2", "'1,2' is not a memory value: unexpected ',2' after the number"),
        (parse_memory, "1:0:0", "'1:0:0' is not a memory value: the h:m:s form is for times only"),
        (parse_time, "1h", "'1h' is not a time value: unknown multiplier 'h' (use k, K, m, M, g or G)"),
        (parse_time, "1:30", "'1:30' is not a time value: the h:m:s form needs exactly 3 fields, got 2"),
        (parse_time, "1:0:0:0", "'1:0:0:0' is not a time value: the h:m:s form needs exactly 3 fields, got 4"),
        (parse_time, "1:x:0", "'1:x:0' is not a time value: the minutes field 'x' is not a decimal number"),
        (parse_number, "abc", "'abc' is not a double value: no number found"),
        (parse_bool, "yes", "'yes' is not a boolean value: use TRUE, FALSE, 1 or 0"),
    ],
)
def test_refusals_name_the_text_and_the_problem(parse, text, message):
    with pytest.raises(InvalidInput) as caught:
        parse(text)
    assert str(caught.value) == message


@pytest.mark.parametrize("value, expected", [(0, 0.0), (4096, 4096.0), (2.5, 2.5), (True, 1.0)])
def test_python_numbers_pass_through(value, expected):
    assert parse_memory(value) == expected
    assert parse_time(value) == expected


@pytest.mark.parametrize(
    "text, integer, expected",
    [("4", True, 4), ("1k", True, 1000), ("1e3", True, 1000), ("010", True, 8), ("-3", True, -3),
     ("2.5", False, 2.5), ("1e-2", False, 0.01), ("infinity", True, INF), ("true", True, 1), (7, True, 7),
     ("2.5", True, ERROR), ("abc", True, ERROR), ("1:0:0", False, ERROR), ("nan", False, ERROR)],
)
def test_parse_number(text, integer, expected):
    if expected == ERROR:
        with pytest.raises(InvalidInput):
            parse_number(text, integer=integer)
    else:
        value = parse_number(text, integer=integer)
        assert value == expected
        if integer and not math.isinf(expected):
            assert type(value) is int


@pytest.mark.parametrize(
    "text, expected",
    [("true", True), ("TRUE", True), ("True", True), ("false", False), ("FALSE", False), ("1", True),
     ("0", False), (True, True), (False, False), (1, True), (0, False),
     ("yes", ERROR), ("2", ERROR), ("", ERROR), ("infinity", ERROR), (2, ERROR)],
)
def test_parse_bool(text, expected):
    if expected == ERROR:
        with pytest.raises(InvalidInput):
            parse_bool(text)
    else:
        assert parse_bool(text) is expected


@pytest.mark.parametrize(
    "value, expected",
    [(4294967296, "4G"), (2147483648, "2G"), (3758096384, "3.5G"), (1073741824, "1G"), (1048576, "1M"),
     (524288, "512K"), (1000000000, "953.674M"), (100, "100"), (0, "0"), (-1024, "-1K"), (INF, "infinity"),
     (0.9 * 1024**3, "921.6M")],
)
def test_format_memory(value, expected):
    assert format_memory(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [(3600, "01:00:00"), (610, "00:10:10"), (86410, "24:00:10"), (5400, "01:30:00"), (0, "00:00:00"),
     (2.5, "00:00:02"), (-3600, "-01:00:00"), (INF, "infinity"), (172800, "48:00:00")],
)
def test_format_time(value, expected):
    assert format_time(value) == expected


@pytest.mark.parametrize("seconds", [0, 59, 3600, 5400, 86410, 172800])
def test_format_time_reads_back(seconds):
    assert parse_time(format_time(seconds)) == seconds


@pytest.mark.parametrize("value, expected", [(4, "4"), (4.0, "4"), (2.5, "2.5"), (INF, "infinity"), (1000, "1000")])
def test_format_number(value, expected):
    assert format_number(value) == expected
