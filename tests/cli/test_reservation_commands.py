"""qrsub, qrstat, qrdel and qralter as a user runs them, against a real server
on the spec's cluster (all.q with user3 denied, host1 and host2)."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.helpers import BACKTRACKING_PATTERN, patience
from tests.reservations_config import ALLQ, OTHERQ, write_config
from tests.servers import running_server

BIN = Path(sys.executable).parent
USERS = {
    "user1": ("user1", "lhcb_user", "lhcb", "user"),
    "user2": ("user2", "lhcb_user", "lhcb", "user"),
    "admin": ("admin", "lhcb_prod", "lhcb", "manager"),
}


@pytest.fixture
def server(tmp_path_factory):
    """A server of its own for each test: the transcripts count reservations
    from 1 and up to max_advance_reservations, whatever ran before."""
    config = write_config(tmp_path_factory.mktemp("arconfig") / "config",
                          wms="duration_offset: 60\nmax_advance_reservations: 4\nreservation_settle: 0.2\n")
    with running_server(tmp_path_factory.mktemp("arserver"), config_dir=config, tokens=USERS) as handle:
        yield handle


@pytest.fixture
def project_xy(server) -> str:
    """specs/003's first reservation: user1's, for user1 and user2, in other.q tomorrow at noon."""
    granted = command(server, "qrsub", "-a", tomorrow(12), "-d", "1:0:0", "-u", "user1,user2", "-q", "other.q",
                      "-N", "project_xy", token=server.issued["user1"])
    assert granted.stdout.strip() == "Your advance reservation 1 has been granted", granted.stderr
    return "1"


def command(server, name: str, *args: str, token: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {**server.env, "WMS_TOKEN": token, **env_vars}
    return subprocess.run([str(BIN / name), *args], env=env, capture_output=True, text=True, timeout=60)


def tomorrow(hour: int, minute: int = 0) -> str:
    moment = (datetime.now() + timedelta(days=1)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return moment.strftime("%Y%m%d%H%M")


def test_qrsub_grants_and_refuses(server):
    t = server.issued
    granted = command(server, "qrsub", "-a", tomorrow(12), "-d", "1:0:0", "-u", "user1,user2", "-q", "other.q",
                      "-N", "project_xy", token=t["user1"])
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout.strip() == "Your advance reservation 1 has been granted"

    not_in_arusers = command(server, "qrsub", "-a", tomorrow(12), "-d", "1:0:0", token=t["user2"])
    assert not_in_arusers.returncode == 1
    assert not_in_arusers.stderr.startswith("denied: user2 is neither manager nor operator nor member of the arusers")

    denied_user = command(server, "qrsub", "-u", "user1,user2,user3", "-q", "all.q", "-a", tomorrow(12),
                          "-d", "1:0:0", token=t["user1"])
    assert denied_user.returncode == 1
    assert denied_user.stderr.strip() == (f"error: no queue instances to reserve ({ALLQ}: user user3 is denied by "
                                          "xuser_lists denied_users)")

    dissonant = command(server, "qrsub", "-a", tomorrow(12), "-e", tomorrow(13), "-d", "2:0:0", token=t["user1"])
    assert dissonant.returncode == 1 and "disagree: the end minus the start is 01:00:00" in dissonant.stderr

    verify = command(server, "qrsub", "-w", "v", "-a", tomorrow(14), "-d", "0:30:0", token=t["user1"])
    assert (verify.returncode, verify.stdout.strip()) == (0, "verification: found possible assignment")

    bad = command(server, "qrsub", "-w", "x", "-d", "1:0:0", token=t["user1"])
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    bad_date = command(server, "qrsub", "-a", "1214", "-d", "1:0:0", token=t["user1"])
    assert bad_date.returncode == 2 and "is not a date_time" in bad_date.stderr
    # Bad usage exits 2, a request the server refuses 1; nothing is stored either way.
    for argv, status, message in [
        (["-he", "maybe"], 2, "-he: expected y[es] or n[o], got 'maybe'"),
        (["-now", "often"], 2, "-now: expected y[es] or n[o], got 'often'"),
        (["-pe", "mpi", "2", "-alloc", "$fill_up", "2"], 2, "-pe and -alloc exclude each other"),
        (["-m", "x"], 1, "-m: 'x' must be a combination of b, e and a, or n"),
        (["-N", "1abc"], 1, "-N: '1abc' is not a valid name"),
        (["-pe", "nope", "2"], 1, "-pe: unknown parallel environment 'nope'"),
    ]:
        refused = command(server, "qrsub", "-a", tomorrow(15), "-d", "0:10:0", *argv, token=t["user1"])
        assert refused.returncode == status and message in refused.stderr, (argv, refused.stderr)
    assert [line.split()[0] for line in command(server, "qrstat", token=t["user1"]).stdout.splitlines()[2:]] == ["1"]


def test_a_backtracking_queue_pattern_is_refused_at_once(server):
    # qrsub -q is matched against every queue instance's name: a
    # backtracking matcher took minutes here and held the server.
    t = server.issued
    started = time.monotonic()
    nowhere = command(server, "qrsub", "-a", tomorrow(12), "-d", "1:0:0", "-q", BACKTRACKING_PATTERN, token=t["user1"])
    granted = command(server, "qrsub", "-a", tomorrow(12), "-d", "1:0:0", "-q", "*?*?*?*?*?*?*?*?*?*?*?q",
                      token=t["user1"])
    assert time.monotonic() - started < patience(20)
    assert (nowhere.returncode, nowhere.stderr.strip()) == (1, "error: no queue instances to reserve")
    assert granted.stdout.strip() == "Your advance reservation 1 has been granted", granted.stderr


def test_qrstat_overview_detail_and_xml(server, project_xy):
    t = server.issued
    overview = command(server, "qrstat", token=t["user1"])
    assert overview.returncode == 0, overview.stderr
    lines = overview.stdout.splitlines()
    assert lines[0] == "AR-ID   name       user         state start at            end at              duration"
    assert lines[1] == "-" * 87
    fields = lines[2].split()
    assert fields[:4] == ["1", "project_xy", "user1", "w"] and fields[-1] == "1:0:0"
    detail = command(server, "qrstat", "-ar", "1", token=t["user1"]).stdout.splitlines()
    assert detail[0] == "=" * 62
    assert "ar_number:                  1" in detail
    assert "acl_list:                   user1,user2" in detail
    assert f"slots:                      {OTHERQ}=1" in detail
    assert "duration:                   1:0:0" in detail
    summary_xml = command(server, "qrstat", "-xml", token=t["user1"]).stdout
    valid(summary_xml)
    [summary] = ElementTree.fromstring(summary_xml).findall("ar_summary")
    assert [child.tag for child in summary] == ["id", "name", "owner", "state", "start_time", "end_time", "duration"]
    assert (summary.findtext("id"), summary.findtext("name"), summary.findtext("duration")) == ("1", "project_xy",
                                                                                               "01:00:00")
    detail_xml = command(server, "qrstat", "-ar", "1", "-xml", token=t["user1"])
    assert detail_xml.returncode == 0
    valid(detail_xml.stdout)
    [detailed] = ElementTree.fromstring(detail_xml.stdout).findall("ar_summary")
    assert [a.get("user") for a in detailed.find("acl_list")] == ["user1", "user2"]
    assert [(g.get("queue_instance"), g.get("slots")) for g in detailed.find("granted_slots_list")] == [(OTHERQ, "1")]
    assert detailed.findtext("group") == "lhcb_user" and detailed.findtext("account") == "sge"
    unknown = command(server, "qrstat", "-xml", "-ar", "1,77", token=t["user1"])
    assert unknown.returncode == 1
    valid(unknown.stdout)
    root = ElementTree.fromstring(unknown.stdout)
    assert [s.findtext("id") for s in root.findall("ar_summary")] == ["1"]
    assert [s.findtext("id") for s in root.findall("ar_unknown")] == ["77"]
    missing = command(server, "qrstat", "-ar", "77", token=t["user1"])
    assert missing.returncode == 1 and "advance reservation 77 does not exist" in missing.stderr
    assert command(server, "qrstat", "-u", "user2", token=t["user1"]).stdout == ""
    # qrstat(1): $user is the caller, * any user.
    assert command(server, "qrstat", "-u", "$user", token=t["user1"]).stdout == overview.stdout
    assert command(server, "qrstat", "-u", "$user", token=t["user2"]).stdout == ""
    assert command(server, "qrstat", "-u", "*", token=t["user2"]).stdout == overview.stdout


def test_jobs_ask_for_the_reservation(server, project_xy, tmp_path):
    t = server.issued
    jdl = tmp_path / "job.jdl"
    jdl.write_text('[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ h_rt = "0:10:0" ]; ]')
    [job_id] = server.ok("submit", str(jdl), "-ar", "1", token=t["user2"]).split()
    too_long = server("submit", str(jdl), "-ar", "1", "-l", "h_rt=2:0:0", token=t["user1"])
    assert too_long.returncode == 1 and "longer than the reservation's duration" in too_long.stderr
    # specs/003 5.1.3.6 (qstat -j): the job shows the reservation it asked for.
    [status] = server.json("status", job_id, token=t["user2"])
    assert status["AR"] == 1
    table = server.ok("status", job_id, token=t["user2"]).splitlines()
    assert table[0].split()[-1] == "AR" and table[2].split()[-1] == "1"
    other = tmp_path / "plain.jdl"
    other.write_text('[ Executable = "/bin/true"; CPUTime = 300; ]')
    [plain] = server.ok("submit", str(other), token=t["user2"]).split()
    assert {j["JobID"]: j["AR"] for j in server.json("jobs", token=t["user2"])} == {int(job_id): 1, int(plain): None}
    why = server.json("why", job_id, token=t["user2"])
    assert why["Status"] == "Waiting"
    queues = {q["Name"]: q for q in server.json("queues", token=t["user1"])}
    assert queues[OTHERQ]["resv/used/tot"] == "0/0/4"    # reserved from tomorrow on


def test_qralter_and_qrdel(server, project_xy, tmp_path):
    t = server.issued
    jdl = tmp_path / "job.jdl"
    jdl.write_text('[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ h_rt = "0:10:0" ]; ]')
    server.ok("submit", str(jdl), "-ar", "1", token=t["user2"])
    changed = command(server, "qralter", "-N", "renamed", "-d", "2:0:0", "1", token=t["user1"])
    assert (changed.returncode, changed.stdout.strip()) == (0, "user1 modified advance reservation 1")
    assert "renamed" in command(server, "qrstat", token=t["user1"]).stdout
    nothing = command(server, "qralter", "1", token=t["user1"])
    assert nothing.returncode == 2
    others = command(server, "qrdel", "1", token=t["user2"])
    assert others.returncode == 1 and "not allowed to delete" in others.stderr
    by_name = command(server, "qrdel", "renamed", token=t["user2"])      # names select the caller's own
    assert by_name.returncode == 1 and "advance reservation renamed does not exist" in by_name.stderr
    assert command(server, "qrdel", token=t["user1"]).returncode == 2
    deleted = command(server, "qrdel", "renamed", token=t["user1"])
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "user1 deleted advance reservation 1")
    assert command(server, "qrstat", token=t["user1"]).stdout == ""
    [record] = [r for r in server.json("accounting", "--reservations", token=t["user1"]) if r["ar_id"] == 1]
    assert (record["state"], record["slots"], record["used_slot_seconds"]) == ("d", 1, 0)
    killed = {r["JobID"]: r["AR"] for r in server.json("accounting", token=t["admin"])}
    assert set(killed.values()) == {1}     # the job of reservation 1, killed with it


def test_max_advance_reservations_exits_25(server):
    t = server.issued
    statuses = [command(server, "qrsub", "-a", tomorrow(20), "-d", "0:10:0", "-q", "other.q", token=t["admin"])
                for _ in range(5)]
    assert [s.returncode for s in statuses] == [0, 0, 0, 0, 25]
    assert statuses[-1].stderr.strip() == ("denied: the maximum number of advance reservations (4) is reached "
                                           "(max_advance_reservations)")
    ids = [s.stdout.split()[3] for s in statuses[:4]]
    # qrdel -u: every reservation of these users.
    deleted = command(server, "qrdel", "-f", "-u", "admin", token=t["admin"])
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines() == [f"admin deleted advance reservation {i}" for i in ids]


ERROR_ROW = {
    "ar_id": 193, "name": "", "owner": "user1", "group": "lhcb_user", "state": "E", "start": "2030-12-18T10:00:00+00:00",
    "end": "2030-12-19T10:00:10+00:00", "duration": "24:0:10", "submission_time": "2030-11-27T17:11:34+00:00",
    "account": "sge", "acl": ["user1", "user2"], "resources": {"myapp": "1"}, "queues": [], "pe": "mpi",
    "pe_range": [3, 3], "ckpt": None,
    "granted": [{"queue": ALLQ, "host": "host1", "slots": 2}, {"queue": ALLQ, "host": "host2", "slots": 1}],
    "slots": "host1=2,host2=1", "complex_values": "host1=myapp=2,host2=myapp=1", "mail_options": "a",
    "mail_list": "", "hard_error": False, "message": f"queue {ALLQ} is disabled",
}


def valid(document: str) -> None:
    """qrstat -xml against the schema its root names (wms/cli/schemas/qrstat.xsd)."""
    from xml.etree import ElementTree

    import xmlschema

    from wms.cli.reservations import SCHEMA

    root = ElementTree.fromstring(document)
    location = root.get("{http://www.w3.org/2001/XMLSchema-instance}noNamespaceSchemaLocation")
    assert location == SCHEMA.as_uri()
    xmlschema.XMLSchema(str(SCHEMA)).validate(document)   # raises, naming the fault, if invalid


def test_detail_format_follows_the_spec_example():
    from wms.cli.reservations import detail_lines, to_xml

    lines = detail_lines(ERROR_ROW, explain=True)
    assert lines[0] == "=" * 62
    assert "ar_number:                  193" in lines
    assert "acl_list:                   user1,user2" in lines
    assert "duration:                   24:0:10" in lines
    assert "slots:                      host1=2,host2=1" in lines
    assert "complex_values:             host1=myapp=2,host2=myapp=1" in lines
    assert f"message:                    queue {ALLQ} is disabled" in lines
    assert "error_handling:             soft" in lines
    document = to_xml([ERROR_ROW], detail=True)
    valid(document)
    summary = ElementTree.fromstring(document).find("ar_summary")
    # Grid Engine's qrstat -ar -xml: its element names, in its order.
    assert [child.tag for child in summary] == [
        "id", "name", "owner", "state", "start_time", "end_time", "duration", "message", "submission_time",
        "group", "account", "resource_list", "granted_slots_list", "granted_parallel_environment", "mail_options",
        "acl_list"]
    assert summary.findtext("state") == "E" and summary.findtext("message") == f"queue {ALLQ} is disabled"
    assert summary.findtext("duration") == "24:00:10"
    assert [(g.get("queue_instance"), g.get("slots")) for g in summary.find("granted_slots_list")] == [
        (f"{ALLQ}@host1", "2"), (f"{ALLQ}@host2", "1")]
    assert [(r.get("name"), r.get("type")) for r in summary.find("resource_list")] == [("myapp", "1")]
    pe = summary.find("granted_parallel_environment")
    assert (pe.findtext("parallel_environment"), pe.findtext("slots")) == ("mpi", "3-3")
    hard = dict(ERROR_ROW, hard_error=True, ckpt="blcr", mail_list="u1@example.org,boss", name="project_xy")
    document = to_xml([hard], detail=True)
    valid(document)
    summary = ElementTree.fromstring(document).find("ar_summary")
    assert summary.findtext("error_handling") == "true" and summary.findtext("checkpoint_name") == "blcr"
    assert [(m.get("user"), m.get("host")) for m in summary.find("mail_list")] == [
        ("u1", "example.org"), ("boss", "NONE")]
    # The summary without -ar: the reasons of an error state only with -explain.
    plain = ElementTree.fromstring(to_xml([ERROR_ROW], detail=False)).find("ar_summary")
    assert plain.find("message") is None
    explained = to_xml([ERROR_ROW], detail=False, explain=True)
    valid(explained)
    assert ElementTree.fromstring(explained).find("ar_summary").findtext("message") == f"queue {ALLQ} is disabled"


def test_every_qrsub_switch_reaches_the_reservation(server):
    t = server.issued
    result = command(server, "qrsub", "-a", tomorrow(6), "-e", tomorrow(7), "-N", "switches", "-A", "physics",
                     "-l", "myapp=1", "-u", "user1", "-u", "@staff", "-q", "*.q", "-now", "y", "-ckpt", "blcr",
                     "-pe", "mpi", "1-2", "-masterq", "other.q", "-m", "bea", "-M", "u1@example.org,boss@example.org", "-he", "yes",
                     token=t["admin"])
    assert result.returncode == 0, result.stderr
    ar_id = result.stdout.split()[3]
    detail = command(server, "qrstat", "-ar", "switches", token=t["admin"]).stdout.splitlines()
    for line in [f"ar_number:                  {ar_id}", "ar_name:                    switches",
                 "account:                    physics", "acl_list:                   user1,@staff",
                 "resource_list:              myapp=1", "queue_list:                 *.q",
                 f"granted_queues:             {OTHERQ}=2", "pe:                         mpi 1-2",
                 "checkpoint_name:            blcr", "mail_options:               bea",
                 "mail_list:                  u1@example.org,boss@example.org", "error_handling:             hard",
                 "duration:                   1:0:0", "master hard queue_list:     other.q"]:
        assert line in detail
    # -now: only INTERACTIVE queues (all.q is BATCH); -ckpt: only queues offering blcr.
    no_ckpt = command(server, "qrsub", "-d", "0:10:0", "-q", "all.q", "-ckpt", "blcr", token=t["admin"])
    assert no_ckpt.returncode == 1 and "checkpoint environment blcr is not in the queue's ckpt_list" in no_ckpt.stderr
    not_interactive = command(server, "qrsub", "-d", "0:10:0", "-q", "all.q", "-now", "yes", token=t["admin"])
    assert not_interactive.returncode == 1 and "qtype is not INTERACTIVE" in not_interactive.stderr
    alloc = command(server, "qrsub", "-a", tomorrow(6), "-d", "0:10:0", "-alloc", "$pe_slots", "2",
                    "-q", "other.q", token=t["admin"])
    assert alloc.returncode == 0, alloc.stderr
    assert command(server, "qrdel", "switches", alloc.stdout.split()[3], token=t["admin"]).returncode == 0
    lone_masterq = command(server, "qrsub", "-d", "0:10:0", "-masterq", "all.q", token=t["admin"])
    assert lone_masterq.returncode == 1 and "-masterq: only meaningful for a parallel reservation" in lone_masterq.stderr
    helped = command(server, "qrsub", "-help", token=t["admin"])
    assert helped.returncode == 0 and "-alloc" in helped.stdout


def local(*fields: int) -> str:
    """A moment of this machine's zone, as the API sends it."""
    return datetime(*fields).astimezone().isoformat()


SPEC_ROWS = [
    {**ERROR_ROW, "ar_id": 192, "name": "project_xy", "owner": "user1", "state": "r", "message": "",
     "start": local(2006, 12, 14, 14, 47, 23), "end": local(2006, 12, 14, 14, 57, 33), "duration": "0:10:10"},
    {**ERROR_ROW, "ar_id": 193, "name": "", "owner": "user2", "state": "w", "message": "",
     "start": local(2006, 12, 18, 10, 0, 0), "end": local(2006, 12, 19, 10, 0, 10), "duration": "24:0:10"},
]


def test_qrstat_prints_the_spec_example():
    from wms.cli.reservations import overview_lines

    assert overview_lines(SPEC_ROWS, explain=False) == [
        "AR-ID   name       user         state start at            end at              duration",
        "---------------------------------------------------------------------------------------",
        "    192 project_xy user1        r     12/14/2006 14:47:23 12/14/2006 14:57:33 0:10:10",
        "    193            user2        w     12/18/2006 10:00:00 12/19/2006 10:00:10 24:0:10",
    ]
    # -explain: the reasons of an error state, one line each.
    broken = dict(SPEC_ROWS[1], state="W", message=f"queue {ALLQ} is disabled; host host2 is no longer configured")
    assert overview_lines([broken], explain=True)[3:] == [f"       queue {ALLQ} is disabled",
                                                          "       host host2 is no longer configured"]
    assert len(overview_lines([broken], explain=False)) == 3


def test_qrstat_ar_prints_the_spec_example():
    from wms.cli.reservations import detail_lines

    row = dict(SPEC_ROWS[1], owner="user1", submission_time=local(2006, 11, 27, 17, 11, 34), message="")
    assert detail_lines(row, explain=False)[:11] == [
        "==============================================================",
        "ar_number:                  193",
        "submission_time:            Mon Nov 27 17:11:34 2006",
        "owner:                      user1",
        "acl_list:                   user1,user2",
        "start:                      Mon Dec 18 10:00:00 2006",
        "end:                        Tue Dec 19 10:00:10 2006",
        "duration:                   24:0:10",
        "slots:                      host1=2,host2=1",
        "complex_values:             host1=myapp=2,host2=myapp=1",
        "ar_name:                    ",
    ]


def test_the_spec_qrsub_examples(server):
    """Reserve a slot in queue all.q on host1 or host2 or host3, in the spec's two spellings."""
    t = server.issued
    start = (datetime.now() + timedelta(days=1)).replace(hour=22, minute=0).strftime("%m%d%H%M")   # MMDDhhmm
    by_host = command(server, "qrsub", "-q", "all.q", "-l", "h=host1|host2|host3", "-u", "user1", "-a", start,
                      "-d", "1:0:0", token=t["user1"])
    by_instance = command(server, "qrsub", "-q", "*@host1,*@host2,*@host3", "-u", "user1", "-a", start,
                          "-d", "1:0:0", token=t["user1"])
    assert by_host.returncode == 0 and by_instance.returncode == 0, by_host.stderr + by_instance.stderr
    ids = [by_host.stdout.split()[3], by_instance.stdout.split()[3]]
    slots = [line for ar_id in ids for line in command(server, "qrstat", "-ar", ar_id, token=t["user1"]).stdout
             .splitlines() if line.startswith("slots:")]
    assert sorted(slots) == ["slots:                      host1=1", "slots:                      host2=1"]
    # Both hosts (one slot each) are booked for that hour now.
    full = command(server, "qrsub", "-q", "all.q", "-l", "h=host1|host2|host3", "-a", start, "-d", "1:0:0",
                   token=t["user1"])
    assert full.returncode == 1 and full.stderr.startswith("denied: ")
    assert command(server, "qrdel", "-f", *ids, token=t["user1"]).returncode == 0


def test_qrsub_reads_the_default_request_files(server, tmp_path):
    """qrsub(1): the cluster's default request file, then the user's $HOME/.sge_ar_request, then the command line."""
    t = server.issued
    cluster_file = tmp_path / "sge_ar_request"
    cluster_file.write_text("# cluster defaults\n-A cluster_account -q other.q\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".sge_ar_request").write_text("-N from_defaults -m e\n")
    env = {"HOME": str(home), "WMS_AR_REQUEST": str(cluster_file)}
    first = command(server, "qrsub", "-a", tomorrow(3), "-d", "0:10:0", token=t["admin"], **env)
    second = command(server, "qrsub", "-a", tomorrow(3), "-d", "0:10:0", "-N", "from_command_line", token=t["admin"],
                     **env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    ids = [first.stdout.split()[3], second.stdout.split()[3]]
    details = [command(server, "qrstat", "-ar", i, token=t["admin"]).stdout.splitlines() for i in ids]
    assert "ar_name:                    from_defaults" in details[0]
    assert "ar_name:                    from_command_line" in details[1]
    for detail in details:
        assert "account:                    cluster_account" in detail and "mail_options:               e" in detail
        assert f"granted_queues:             {OTHERQ}=1" in detail
    assert command(server, "qrdel", "-f", *ids, token=t["admin"]).returncode == 0
    (home / ".sge_ar_request").write_text('-N "unterminated\n')
    broken = command(server, "qrsub", "-d", "0:10:0", token=t["admin"], **env)
    assert broken.returncode == 2 and ".sge_ar_request, line 1: No closing quotation" in broken.stderr
