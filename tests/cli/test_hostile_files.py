"""Files that are not UTF-8 text give one line on stderr, never a traceback,
and nothing reaches the server."""

from __future__ import annotations

import subprocess
import sys

BAD = b'[Executable="\xed\xa0\x80";]'  # a UTF-16 surrogate written as UTF-8: not UTF-8


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_submit_of_a_file_that_is_not_utf8(server, tokens, tmp_path):
    path = tmp_path / "x.jdl"
    path.write_bytes(BAD)
    before = server.json("jobs", token=tokens["roland"])
    line = one_line(server("submit", str(path), token=tokens["roland"]))
    assert line == f"wms submit: {path}:1:14: not valid UTF-8 text (byte 0xED)"
    assert server.json("jobs", token=tokens["roland"]) == before


def test_submit_from_stdin_that_is_not_utf8(server, tokens):
    env = dict(server.env, WMS_TOKEN=tokens["roland"])
    result = subprocess.run([sys.executable, "-m", "wms.cli.main", "submit", "-"], env=env, input=BAD,
                            capture_output=True, timeout=60)
    result = subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(),
                                         result.stderr.decode())
    assert one_line(result) == "wms submit: <stdin>:1:14: not valid UTF-8 text (byte 0xED)"


def qconf(server, *args, token):
    env = dict(server.env, WMS_TOKEN=token)
    return subprocess.run([sys.executable, "-m", "wms.cli.qconf", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_qconf_rule_set_and_complex_files_that_are_not_utf8(server, tokens, tmp_path):
    rqs = tmp_path / "bad.rqs"
    rqs.write_bytes(b'{\n name q1\n description "\xff"\n}\n')
    assert one_line(qconf(server, "-Arqs", str(rqs), token=tokens["admin"])) == (
        f"qconf: {rqs}:3:15: not valid UTF-8 text (byte 0xFF)")
    table = tmp_path / "complexes"
    table.write_bytes(b"#name\nabc\xc3\n")
    assert one_line(qconf(server, "-Mc", str(table), token=tokens["admin"])) == (
        f"qconf: {table}:2:4: not valid UTF-8 text (byte 0xC3)")
