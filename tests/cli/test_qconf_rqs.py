"""qconf's resource quota switches against a real server, transcript by
transcript as specs/001 shows them (the user@host prefix is the caller's)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

WHO = r"admin@\S+"


def qconf(server, *args, token, editor=None):
    env = dict(server.env, WMS_TOKEN=token)
    if editor is not None:
        env["EDITOR"] = editor
    return subprocess.run([sys.executable, "-m", "wms.cli.qconf", *args], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def admin(server, tokens):
    """qconf as the manager, on a server whose rule sets are cleared first:
    the server is shared by the module, each test starts from no sets."""
    def run(*args, editor=None):
        return qconf(server, *args, token=tokens["admin"], editor=editor)
    run("-drqs")
    return run


def add(admin, tmp_path, name: str, body: str = "") -> None:
    """A rule set named ``name`` stored as the transcript before this one left it."""
    path = tmp_path / f"{name}.rqs"
    path.write_text(f"{{\n name {name}\n enabled true\n{body}}}\n")
    assert admin("-Arqs", str(path)).returncode == 0


def ok(result, pattern):
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(pattern, result.stdout.strip()), result.stdout


def refused(result, message):
    assert result.returncode == 1 and result.stderr.strip() == message, (result.stdout, result.stderr)


def writing_editor(tmp_path, content: str | None) -> str:
    """An $EDITOR that saves ``content`` (None: quits without saving, ':q')."""
    script = tmp_path / "editor.sh"
    if content is None:
        script.write_text("#!/bin/sh\nexit 0\n")
    else:
        (tmp_path / "saved.rqs").write_text(content)
        script.write_text(f"#!/bin/sh\ncat {tmp_path / 'saved.rqs'} > \"$1\"\n")
    script.chmod(0o755)
    return str(script)


def test_Arqs_adds_from_a_file_once(admin, tmp_path):
    rule_set = tmp_path / "rule_set.txt"
    rule_set.write_text('{\n name rule_set_2\n enabled true\n description "rule set 2"\n}\n')
    ok(admin("-Arqs", str(rule_set)), WHO + r' added "rule_set_2" to resource quota set list')
    refused(admin("-Arqs", str(rule_set)), 'resource quota set "rule_set_2" already exists')


def test_Mrqs_modifies_from_a_file(admin, tmp_path):
    rule_set = tmp_path / "rule_set.txt"
    rule_set.write_text('{\n name rule_set_3\n enabled true\n description "rule set 2"\n}\n')
    refused(admin("-Mrqs", str(rule_set), "rule_set_3"), 'resource quota set "rule_set_3" does not exist')
    refused(admin("-Mrqs", str(rule_set), "rule_set_4"),
            'resource quota set "rule_set_4" does not match rule set definition')
    ok(admin("-Mrqs", str(rule_set)), WHO + " modified resource quota set list")
    assert admin("-srqsl").stdout.split() == ["rule_set_3"]


def test_arqs_in_the_editor(admin, tmp_path):
    refused(admin("-arqs", editor=writing_editor(tmp_path, None)), 'resource quota set name "template" is not valid')
    ok(admin("-arqs", "rule_set_1", editor=writing_editor(tmp_path, None)),
       WHO + r' added "rule_set_1" to resource quota set list')
    refused(admin("-arqs", "rule_set_1"), 'resource quota set "rule_set_1" already exists')


def test_mrqs_in_the_editor(admin, tmp_path):
    add(admin, tmp_path, "rule_set_1")
    add(admin, tmp_path, "rule_set_3")
    edited = "{\n name rule_set_1\n enabled true\n description \"\"\n limit users roland to slots=4\n}\n"
    ok(admin("-mrqs", "rule_set_1", editor=writing_editor(tmp_path, edited)),
       WHO + r' modified "rule_set_1" in resource quota set list')
    assert "limit        users roland to slots=4" in admin("-srqs", "rule_set_1").stdout
    refused(admin("-mrqs", "unknown_set"), 'resource quota set "unknown_set" does not exist')
    both = tmp_path / "shown.rqs"
    shown = admin("-srqs").stdout
    assert shown.count("name ") >= 2 and "rule_set_1" in shown and "rule_set_3" in shown
    both.write_text(shown)
    ok(admin("-mrqs", editor=writing_editor(tmp_path, shown)), WHO + " modified resource quota set list")


def test_srqs_and_drqs(admin, tmp_path):
    add(admin, tmp_path, "rule_set_1")
    add(admin, tmp_path, "rule_set_3")
    shown = admin("-srqs", "rule_set_1")
    assert shown.returncode == 0 and "rule_set_3" not in shown.stdout and "name         rule_set_1" in shown.stdout
    ok(admin("-drqs", "rule_set_1"), WHO + r' removed "rule_set_1" from resource quota set list')
    refused(admin("-drqs", "unknown_rule_set"), 'denied: resource quota set "unknown_rule_set" does not exist')
    ok(admin("-drqs"), WHO + " removed resource quota set list")
    refused(admin("-srqsl"), "no resource quota set list defined")


def test_attribute_switches(admin, tmp_path):
    ruleset = tmp_path / "ruleset_1"
    ruleset.write_text("{\n name ruleset_1\n enabled true\n limit users @eng to slots=10\n"
                       " limit name arch_rule users @eng to arch=lx24-amd64\n}\n")
    assert admin("-Arqs", str(ruleset)).returncode == 0
    refused(admin("-aattr", "resource_quota", "limit", "slots=20", "ruleset_1/1"),
            'No modification because "slots" already exists in "limit" of "ruleset_1/1"')
    ok(admin("-aattr", "resource_quota", "limit", "compiler_lic=5", "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in rqs list')
    refused(admin("-aattr", "resource_quota", "limit", "arch=sol-sparc64", "ruleset_1/arch_rule"),
            'No modification because "arch" already exists in "limit" of "ruleset_1/2"')
    resource = tmp_path / "resource.txt"
    resource.write_text("limit slots=20\n")
    refused(admin("-Aattr", "resource_quota", str(resource), "ruleset_1/1"),
            'No modification because "slots" already exists in "limit" of "ruleset_1/1"')
    ok(admin("-dattr", "resource_quota", "limit", "compiler_lic=5", "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in rqs list')
    refused(admin("-dattr", "resource_quota", "limit", "compiler_lic=5", "ruleset_1/1"),
            '"compiler_lic" does not exist in "limit" of "resource_quota"')
    resource2 = tmp_path / "resource2.txt"
    resource2.write_text("limit compiler_lic=5\n")
    ok(admin("-Aattr", "resource_quota", str(resource2), "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in resource_quota list')
    ok(admin("-Dattr", "resource_quota", str(resource2), "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in resource_quota list')
    refused(admin("-Dattr", "resource_quota", str(resource2), "ruleset_1/1"),
            '"compiler_lic" does not exist in "limit" of "resource_quota"')
    ok(admin("-mattr", "resource_quota", "limit", "slots=5", "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in resource_quota list')
    ok(admin("-mattr", "resource_quota", "limit", "compiler_lic=5", "ruleset_1/1"),
       r'Unable to find "compiler_lic" in "limit" of "resource_quota" - Adding new element\.')
    ok(admin("-mattr", "resource_quota", "enabled", "false", "ruleset_1"),
       WHO + r' modified "ruleset_1" in resource_quota list')
    ok(admin("-Mattr", "resource_quota", str(resource), "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in resource_quota list')
    ok(admin("-rattr", "resource_quota", "limit", "slots=7", "ruleset_1/1"),
       WHO + r' modified "ruleset_1/1" in resource_quota list')
    shown = admin("-srqs", "ruleset_1").stdout
    assert "enabled      false" in shown and "limit        users @eng to slots=7\n" in shown
    refused(admin("-mattr", "resource_quota", "limit", "slots=5", "ruleset_1/9"),
            'resource quota rule "ruleset_1/9" does not exist')
    refused(admin("-mattr", "resource_quota", "limit", "slots=5", "rule_1/1"),
            'resource quota set "rule_1" does not exist')
    refused(admin("-mattr", "resource_quota", "limit", "lic=5", "ruleset_1/1"),
            'ruleset_1/1: unknown resource \'lic\' in a limit')
    assert admin("-aattr", "queue", "limit", "slots=5", "ruleset_1/1").returncode == 1


def test_users_may_look_but_not_change(server, tokens, admin, tmp_path):
    add(admin, tmp_path, "ruleset_1", " limit users @eng to slots=10\n")
    rule_set = tmp_path / "r.txt"
    rule_set.write_text("{\n name by_user\n}\n")
    result = qconf(server, "-Arqs", str(rule_set), token=tokens["roland"])
    assert result.returncode == 1 and "role 'user' may not do this (needs operator or manager)" in result.stderr
    shown = qconf(server, "-srqs", token=tokens["roland"])
    assert shown.returncode == 0 and "ruleset_1" in shown.stdout and "by_user" not in shown.stdout


def test_a_grammar_error_names_the_file_and_line(admin, tmp_path):
    bad = tmp_path / "bad.rqs"
    bad.write_text("{\n name bad\n limit users roland\n}\n")
    refused(admin("-Arqs", str(bad)), f"{bad}:3: a rule needs 'to' and its limits (limit ... to resource=value)")
    assert admin("-Mrqs", str(bad), "a", "b").returncode == 1
    assert admin("-bogus").returncode == 2
