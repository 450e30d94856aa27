"""qquota and `wms why` on resource quotas, against a real server (specs/001
"qquota", qquota(1)): one line per rule instance in use, the caller's by
default, option files, and XML valid against the specification's schema."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import xmlschema

from tests.cli.test_qconf_rqs import qconf
from tests.helpers import BACKTRACKING_PATTERN, patience
from wms.cli.qquota import SCHEMA

LOCAL = ["--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default"]
RULESETS = """{
   name ruleset1
   enabled true
   limit users roland to slots=3
   limit users {*} to slots=1
}
{
   name per_host
   enabled true
   limit users roland hosts {@lx_hosts} to slots=$num_proc*5
}
{
   name arch_set
   enabled true
   limit users @staff,!andre to arch=lx24-amd64
}
"""


def qquota(server, *args, token, home=None):
    env = dict(server.env, WMS_TOKEN=token)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "wms.cli.qquota", *args], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(scope="module")
def in_use(server, tokens, tmp_path_factory):
    """The rule sets stored, and two of roland's jobs matched on host durin."""
    path = tmp_path_factory.mktemp("rqs") / "rulesets.rqs"
    path.write_text(RULESETS)
    added = qconf(server, "-Mrqs", str(path), token=tokens["admin"])
    assert added.returncode == 0, added.stderr
    jdl = path.with_name("hello.jdl")
    jdl.write_text('[ Executable = "/bin/true"; CPUTime = 300; ]')
    for _ in range(3):
        server.ok("submit", str(jdl), token=tokens["roland"])
    for n in range(2):
        result = server("request-job", *LOCAL, "--host", "durin", "--load", "arch=lx-amd64", "--platform",
                        "x86_64-el9", "--pilot-id", f"quota-pilot-{n}", token=tokens[f"quota-pilot-{n}"])
        assert result.returncode == 0, result.stderr
    return path


def lines(result):
    assert result.returncode == 0, result.stderr
    return [line.split(None, 2) if not line.startswith("-") else line for line in result.stdout.splitlines()]


def test_qquota_shows_the_callers_rule_instances(server, tokens, in_use):
    result = qquota(server, token=tokens["roland"])
    out = result.stdout.splitlines()
    assert out[0].split() == ["resource", "quota", "rule", "limit", "filter"] and out[1] == "-" * 80
    rows = [line.split() for line in out[2:]]
    assert ["ruleset1/1", "slots=2/3", "users", "roland"] in rows
    assert ["per_host/1", "slots=2/10", "users", "roland", "hosts", "durin"] in rows
    assert ["arch_set/1", "arch=lx24-amd64", "users", "@staff,!andre"] in rows
    assert len(rows) == 3


def test_qquota_selects_users_hosts_and_resources(server, tokens, in_use):
    assert len(qquota(server, "-u", "andre", token=tokens["roland"]).stdout.splitlines()) == 2
    only_slots = qquota(server, "-l", "slots", "-h", "durin", token=tokens["roland"]).stdout
    assert "per_host/1" in only_slots and "arch_set" not in only_slots
    assert "per_host/1" not in qquota(server, "-h", "carc", token=tokens["roland"]).stdout
    unknown = qquota(server, "-l", "licences", token=tokens["roland"])
    assert unknown.returncode == 1 and "licences" in unknown.stderr


def test_option_files_the_users_wins_and_the_command_line_wins_over_both(server, tokens, in_use, tmp_path):
    (tmp_path / ".sge_qquota").write_text("# mine\n-l arch\n")
    assert [row.split()[0] for row in qquota(server, token=tokens["roland"], home=tmp_path).stdout.splitlines()[2:]] \
        == ["arch_set/1"]
    overridden = qquota(server, "-l", "slots", token=tokens["roland"], home=tmp_path).stdout
    assert "arch_set/1" not in overridden and "ruleset1/1" in overridden


def test_qquota_xml_is_valid_against_the_specifications_schema(server, tokens, in_use):
    result = qquota(server, "-xml", token=tokens["roland"])
    assert result.returncode == 0, result.stderr
    schema = xmlschema.XMLSchema(str(SCHEMA))
    schema.validate(result.stdout)
    document = schema.to_dict(result.stdout)
    rules = {rule["@name"]: rule for rule in document["qquota_rule"]}
    assert rules["ruleset1/1"]["user"] == ["roland"]
    assert rules["ruleset1/1"]["limit"] == [{"@resource": "slots", "@limit": "3", "@value": "2"}]
    assert rules["per_host/1"]["host"] == ["durin"]
    assert rules["arch_set/1"]["xuser"] == ["andre"]
    assert rules["arch_set/1"]["limit"] == [{"@resource": "arch", "@limit": "lx24-amd64"}]


def test_why_names_the_exceeded_set_and_rule(server, tokens, in_use, tmp_path):
    jdl = tmp_path / "arch.jdl"
    jdl.write_text('[ Executable = "/bin/true"; CPUTime = 300; ]')
    [job_id] = server.ok("submit", str(jdl), token=tokens["roland"]).split()
    third = json.loads(server.ok("request-job", *LOCAL, "--host", "durin", "--load", "arch=lx-amd64", "--platform",
                                 "x86_64-el9", "--pilot-id", "quota-pilot-3", token=tokens["quota-pilot-3"]))
    try:
        result = server.json("why", job_id, token=tokens["roland"])
        reasons = {q["Queue"]: q for q in result["Queues"]}
        local = reasons["DIRAC.Local.ch/localhost/default"]
        assert local["Layer"] == "quota"
        assert local["Reason"] == ('cannot run in queue DIRAC.Local.ch/localhost/default because it exceeds limit '
                                   '"ruleset1/1" (slots=3/3 for user roland)')
        assert "exceeds limit" in server.ok("why", job_id, token=tokens["roland"])
    finally:
        # The other tests of the module count roland's two jobs of the fixture.
        server.ok("kill", str(third["JobID"]), str(job_id), token=tokens["roland"])


def test_a_backtracking_queue_filter_is_answered_at_once(server, tokens, in_use, tmp_path):
    # A rule set's queue filter is matched against every queue's name when a
    # job is explained or matched: a backtracking matcher took minutes here.
    path = tmp_path / "hostile.rqs"
    path.write_text(f"{{\n name hostile\n enabled true\n limit queues {{{BACKTRACKING_PATTERN}}} to slots=0\n}}\n")
    added = qconf(server, "-Arqs", str(path), token=tokens["admin"])
    assert added.returncode == 0, added.stderr
    jdl = tmp_path / "hello.jdl"
    jdl.write_text('[ Executable = "/bin/true"; CPUTime = 300; ]')
    [job_id] = server.ok("submit", str(jdl), token=tokens["roland"]).split()
    try:
        started = time.monotonic()
        why = server.json("why", job_id, token=tokens["roland"])
        shown = qquota(server, "-q", BACKTRACKING_PATTERN, token=tokens["roland"])
        assert time.monotonic() - started < patience(20)
        local = {q["Queue"]: q for q in why["Queues"]}["DIRAC.Local.ch/localhost/default"]
        assert "hostile" not in json.dumps(local)  # no queue name matches the filter: its slots=0 holds nowhere
        assert shown.returncode == 0 and "hostile" not in shown.stdout
    finally:
        server.ok("kill", job_id, token=tokens["roland"])
        assert qconf(server, "-drqs", "hostile", token=tokens["admin"]).returncode == 0


def test_an_empty_table_says_on_stderr_why_it_is_empty(server, tokens, in_use):
    """andre has no job: nothing counts against the rules that apply to him.
    The table stays the specification's; the hint goes to stderr."""
    result = qquota(server, token=tokens["andre"])
    assert result.returncode == 0
    assert result.stdout.splitlines()[1] == "-" * 80 and len(result.stdout.splitlines()) == 2
    assert "no rule of an enabled set counts anything of yours" in result.stderr
    assert "qconf -srqs shows the limits" in result.stderr
    assert qquota(server, "-xml", token=tokens["andre"]).stderr == ""
