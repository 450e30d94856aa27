"""docs/commands.md and deploy/wms-completion.bash are what the commands'
parsers say (regenerate with `make reference`), and the completion
completes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers import REPO
from wms import command_reference


def test_the_generated_files_are_up_to_date():
    assert command_reference.stale() == [], "run `make reference` and commit docs/commands.md and the completion"


def test_every_command_and_subcommand_has_its_section():
    text = command_reference.REFERENCE.read_text()
    for program in command_reference.PROGRAMS:
        assert f"## `{program}`" in text
    for section in ("### `wms submit`", "#### `wms admin token create`", "### `wms bench http`"):
        assert section in text
    assert "--strict" in text and "-q wc_queue_list" in text


def test_a_stale_file_is_found(tmp_path, monkeypatch):
    old = tmp_path / "commands.md"
    old.write_text("# Command reference\n")
    monkeypatch.setattr(command_reference, "GENERATED", {old: command_reference.reference})
    assert command_reference.stale() == [old]
    assert command_reference.main(["--check"]) == 1


def complete(*words: str) -> list[str]:
    """What bash offers for the last of ``words`` with the completion script loaded."""
    line = " ".join(f"'{w}'" for w in words)
    script = (f"source {command_reference.COMPLETION}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
              '_wms_complete; printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, cwd=REPO)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_bash_completes_subcommands_and_options_at_every_level():
    assert complete("wms", "ma") == ["match-queues"]
    assert complete("wms", "admin", "token", "") == ["create", "list", "revoke", "-h", "--help"]
    assert complete("wms", "submit", "--st") == ["--strict"]
    assert complete("/usr/bin/qconf", "-sc") == ["-sc"]
    assert set(complete("qconf", "-s")) == {"-sc", "-sql", "-sq", "-srqs", "-srqsl"}
    assert complete("wms-pilot", "--cpu") == ["--cpu-time-left"]
    assert set(complete("qrsub", "-he")) == {"-help", "-he"}
