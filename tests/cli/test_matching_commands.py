"""`wms request-job`, `why`, `queues`, `output` as a user runs them, against a real server."""

from __future__ import annotations

import json

from tests.helpers import EXAMPLES

LOCAL = ["--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default"]


def test_request_job_prints_the_job_or_exits_3(server, tokens):
    server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["roland"])
    result = server("request-job", *LOCAL, "--host", "wn01", "--load", "arch=lx-amd64,mem_free=8G",
                    "--platform", "x86_64-el9", "--pilot-id", "cli-pilot", token=tokens["cli-pilot"])
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert job["JobID"] >= 1 and "JDL" in job
    [row] = server.json("status", str(job["JobID"]), token=tokens["admin"])
    assert row["Status"] == "Matched" and row["Queue"] == "DIRAC.Local.ch/localhost/default"
    users_may_not = server("request-job", *LOCAL, "--host", "wn01", token=tokens["roland"])
    assert users_may_not.returncode == 1 and "may not do this" in users_may_not.stderr


def test_request_job_exit_3_when_nothing_fits(server, tokens):
    result = server("request-job", "--site", "LCG.CERN.ch", "--ce", "ce02.cern.ch", "--queue", "arm",
                    "--host", "arm01", "--pools", "", "--cpu-time-left", "1", token=tokens["pilot"])
    assert result.returncode == 3
    assert result.stderr.startswith("no match: ")
    result = server("request-job", "--site", "Nowhere", "--ce", "x", "--queue", "y", "--host", "h",
                    token=tokens["pilot"])
    assert result.returncode == 1 and "unknown queue 'Nowhere/x/y'" in result.stderr


def test_why_names_the_layer_and_reason_for_each_queue(server, tokens):
    [job_id] = server.ok("submit", str(EXAMPLES / "arm.jdl"), token=tokens["roland"]).split()
    result = server.json("why", job_id, token=tokens["roland"])
    by_queue = {q["Queue"]: q for q in result["Queues"]}
    assert by_queue["LCG.CERN.ch/ce02.cern.ch/arm"]["Reason"].startswith("eligible")
    assert by_queue["LCG.CERN.ch/ce01.cern.ch/long"]["Reason"] == "platform mismatch"
    assert by_queue["LCG.CERN.ch/ce01.cern.ch/long"]["Layer"] == "requirements"
    text = server.ok("why", job_id, token=tokens["roland"])
    assert "platform mismatch" in text and "could run job" in text


def test_why_a_grid_engine_request_no_queue_offers(server, tokens, tmp_path):
    jdl = tmp_path / "big.jdl"
    jdl.write_text('[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ compiler_lic = 30; ]; ]')
    [job_id] = server.ok("submit", str(jdl), token=tokens["roland"]).split()
    result = server.json("why", job_id, token=tokens["roland"])
    reasons = {q["Reason"] for q in result["Queues"]}
    assert "global compiler_lic: 30 needed, only 20 in total" in reasons
    assert result["Summary"].startswith("no queue can run job")


def test_queues_shows_slots_and_consumables(server, tokens):
    rows = server.json("queues", token=tokens["roland"])
    by_name = {r["Name"]: r for r in rows}
    local = by_name["DIRAC.Local.ch/localhost/default"]
    assert local["Kind"] == "queue" and local["resv/used/tot"].endswith("/4")
    assert "compiler_lic" in local["Consumables"]
    assert by_name["global"]["Consumables"]["compiler_lic"].endswith("/20")
    assert by_name["durin"]["Kind"] == "host"
    table = server.ok("queues", token=tokens["roland"])
    assert table.splitlines()[0].split() == ["Kind", "Name", "resv/used/tot", "Consumables"]


def test_output_of_a_job_without_output(server, tokens):
    [job_id] = server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["roland"]).split()
    result = server("output", job_id, token=tokens["roland"])
    assert result.returncode == 1 and "has no output yet" in result.stderr


def qconf(server, *args, token):
    import subprocess
    import sys

    env = dict(server.env, WMS_TOKEN=token)
    return subprocess.run([sys.executable, "-m", "wms.cli.qconf", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_qconf_shows_and_replaces_the_complex_table(server, tokens, tmp_path):
    shown = qconf(server, "-sc", token=tokens["roland"])
    assert shown.returncode == 0 and shown.stdout.startswith("#name")
    table = tmp_path / "complexes"
    table.write_text(shown.stdout + "\nscratch sc MEMORY <= YES YES 0 0\n")
    refused = qconf(server, "-Mc", str(table), token=tokens["roland"])
    assert refused.returncode == 1 and "needs manager" in refused.stderr
    changed = qconf(server, "-Mc", str(table), token=tokens["admin"])
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.strip().endswith('added "scratch" to complex entry list')
    assert "scratch" in qconf(server, "-sc", token=tokens["roland"]).stdout
    bad = tmp_path / "bad"
    bad.write_text(shown.stdout + "\nlic l INT >= YES YES 0 0\n")
    result = qconf(server, "-Mc", str(bad), token=tokens["admin"])
    assert result.returncode == 1
    assert 'Consumable "lic" can have only <= as an relational operator' in result.stderr
    assert qconf(server, "-Mc", "/nonexistent", token=tokens["admin"]).returncode == 1
    assert qconf(server, token=tokens["admin"]).returncode == 2
