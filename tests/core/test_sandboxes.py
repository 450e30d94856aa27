"""The rules of sandbox names, OutputSandbox patterns and sizes (wms/core/sandboxes.py)."""

from __future__ import annotations

import pytest

from wms.core.errors import InvalidInput, TooLarge
from wms.core.sandboxes import (
    SandboxFile, SandboxLimits, check_digest, check_job_size, check_name, input_names,
)


@pytest.mark.parametrize("name, says", [
    ("", "empty file name"),
    ("..", "'..' is not a file name"),
    (".", "'.' is not a file name"),
    ("a/b", "is not a plain file name (no directories: '/' is not allowed)"),
    ("..\\x", "is not a plain file name"),
    ("a\nb", "holds a control character"),
    ("é" * 128, "file name longer than 255 bytes"),
])
def test_names_that_could_leave_the_job_directory_are_refused(name, says):
    with pytest.raises(InvalidInput) as caught:
        check_name(name, "job.jdl")
    assert str(caught.value).startswith("job.jdl: ") and says in str(caught.value)


@pytest.mark.parametrize("name", ["run.sh", ".hidden", "a b.txt", "x" * 255, "résumé.pdf"])
def test_plain_names_are_kept(name):
    assert check_name(name) == name


@pytest.mark.parametrize("entries, expected", [
    (["run.sh", "data/in.txt", "/abs/path/lib.py"], {"run.sh": "run.sh", "data/in.txt": "in.txt",
                                                     "/abs/path/lib.py": "lib.py"}),
    (["../up/one.txt"], {"../up/one.txt": "one.txt"}),
])
def test_an_input_file_arrives_under_its_base_name(entries, expected):
    assert input_names(entries, "job.jdl") == expected


@pytest.mark.parametrize("entries, says", [
    (["a/x.txt", "b/x.txt"], "InputSandbox entries 'a/x.txt' and 'b/x.txt' both arrive as 'x.txt'"),
    (["LFN:/lhcb/user/r/roland/in.dst"], "catalogue files (LFN:, SB:) are not supported"),
    (["data/"], "is a directory; list its files"),
    (["data/.."], "'..' is not a file name"),
])
def test_input_entries_that_cannot_be_files_of_the_job_are_refused(entries, says):
    with pytest.raises(InvalidInput, match=says.replace("(", r"\(").replace(")", r"\)")):
        input_names(entries, "job.jdl")


def test_sizes_are_checked_per_file_then_per_job():
    limits = SandboxLimits(file_bytes=100, job_bytes=150)
    check_job_size([SandboxFile("a", 100, ""), SandboxFile("b", 50, "")], limits, "job.jdl")
    with pytest.raises(TooLarge, match="job.jdl: sandbox file 'b' is 101 bytes, more than 100"):
        check_job_size([SandboxFile("a", 1, ""), SandboxFile("b", 101, "")], limits, "job.jdl")
    with pytest.raises(TooLarge, match=r"job.jdl: sandbox of 151 bytes, more than 150 per job \(sandboxes.job_bytes\)"):
        check_job_size([SandboxFile("a", 100, ""), SandboxFile("b", 51, "")], limits, "job.jdl")


@pytest.mark.parametrize("value", ["", "A" * 64, "a" * 63, "g" * 64, "../" + "a" * 61])
def test_digests_are_64_lowercase_hex_digits(value):
    with pytest.raises(InvalidInput, match="not a SHA-256 digest"):
        check_digest(value)
