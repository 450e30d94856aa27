"""The small things a newcomer meets first: --version and -help on every
command, a closed pipe, error lines that name their program, WMS_URL
spelled either way, a missing configuration directory, qconf -sql/-sq and
the machine-readable queue overview."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pilot
import wms
from tests.e2e.processes import pilot_process
from tests.helpers import CONFIG_DIR, REPO, interruptible, log_tails, patience, wait_until
from tests.servers import WMS, free_port, wait_for

BIN = Path(sys.executable).parent
COMMANDS = ["wms", "qconf", "qrsub", "qrstat", "qrdel", "qralter", "qquota", "wms-pilot"]


def run(command: str, *args: str, env: dict[str, str] | None = None, cwd: Path = REPO,
        **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / command), *args], env=env or os.environ, cwd=cwd, capture_output=True,
                          text=True, timeout=patience(60), **kw)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_its_version(command):
    result = run(command, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{command} (wms) {wms.__version__}"


def test_the_pilot_ships_the_version_of_the_release():
    assert pilot.__version__ == wms.__version__


@pytest.mark.parametrize("command", ["qconf", "qrsub", "qrstat", "qrdel", "qralter", "qquota", "wms-pilot"])
def test_help_as_grid_engine_spells_it(command):
    result = run(command, "-help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {command}")


def test_a_reader_that_goes_away_ends_the_listing_quietly(server, tokens):
    server.ok("submit", str(REPO / "examples" / "parametric.jdl"), token=tokens["roland"])
    read_end, write_end = os.pipe()
    os.close(read_end)        # as `| head` does once it has its lines
    try:
        env = dict(server.env, WMS_TOKEN=tokens["roland"])
        result = subprocess.run([*WMS, "jobs", "--json"], env=env, cwd=REPO, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141


@pytest.mark.parametrize("command, args", [("qconf", ["-srqsl"]), ("qquota", []), ("qrstat", []),
                                           ("wms", ["jobs"])])
def test_errors_name_their_program(server, tokens, command, args):
    env = dict(server.env, WMS_URL=f"http://127.0.0.1:{free_port()}", WMS_TOKEN=tokens["roland"])
    result = run(command, *args, env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{command}") and "cannot reach the WMS server" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_qconf_names_itself_when_it_cannot_read_a_file(server, tokens, tmp_path):
    result = run("qconf", "-Arqs", str(tmp_path / "missing.rqs"), env=dict(server.env, WMS_TOKEN=tokens["admin"]))
    assert result.returncode == 1
    assert result.stderr.strip() == f"qconf: cannot read file {str(tmp_path / 'missing.rqs')!r}: No such file or directory"


@pytest.mark.parametrize("suffix", ["/api/v1", "/api/v1/", "/"])
def test_wms_url_may_name_the_api(server, tokens, suffix):
    env = dict(server.env, WMS_URL=server.url + suffix, WMS_TOKEN=tokens["roland"])
    result = run("wms", "jobs", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[")


def test_wms_up_outside_the_repository_says_where_it_looked(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "WMS_CONFIG"}
    result = run("wms", "up", env=dict(env, HOME=str(tmp_path)), cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert str(tmp_path / "config") in line
    assert "--config" in line and "WMS_CONFIG" in line


def test_qconf_shows_the_queue_list_and_a_queue(server, tokens):
    env = dict(server.env, WMS_TOKEN=tokens["roland"])
    listing = run("qconf", "-sql", env=env)
    assert listing.returncode == 0, listing.stderr
    assert "LCG.CERN.ch/ce01.cern.ch/long" in listing.stdout.splitlines()
    shown = run("qconf", "-sq", "LCG.CERN.ch/ce01.cern.ch/long", env=env)
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(None, 1) for line in shown.stdout.splitlines())
    assert fields["qname"] == "LCG.CERN.ch/ce01.cern.ch/long"
    assert fields["CPUTime"] == "172800"
    assert "slots=100" in fields["complex_values"] and fields["slots"] == "100"
    several = run("qconf", "-sq", "LCG.CERN.ch/*", env=env)
    assert several.stdout.count("qname") == sum(1 for q in listing.stdout.split() if q.startswith("LCG.CERN.ch/"))
    missing = run("qconf", "-sq", "Nowhere/x/y", env=env)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'qconf: no queue matches "Nowhere/x/y" (qconf -sql lists them)'


def test_queues_json_gives_numbers(server, tokens):
    rows = server.json("queues", token=tokens["roland"])
    long = next(r for r in rows if r["Name"] == "LCG.CERN.ch/ce01.cern.ch/long")
    assert long["Slots"] == {"reserved": 0, "used": 0, "total": 100}
    assert long["Usage"]["compiler_lic"] == {"used": 0, "total": 4}
    assert long["Parameters"]["CPUTime"] == 172800


def test_pools_json_details_gives_each_pool_whole(server, tokens):
    [job_id] = server.ok("submit", str(REPO / "examples" / "software.jdl"), token=tokens["roland"]).split()
    [status] = server.json("status", job_id, token=tokens["roland"])
    assert status["SubmitPool"] in server.json("pools", token=tokens["roland"])      # INTERFACE.md: the ids
    pools = {p["SubmitPool"]: p for p in server.json("pools", "--details", token=tokens["roland"])}
    pool = pools[status["SubmitPool"]]
    assert pool["VO"] == "lhcb" and isinstance(pool["QueueCount"], int) and pool["QueueCount"] > 0
    assert isinstance(pool["Requirements"], dict)


@contextlib.contextmanager
def wms_up(tmp_path: Path, site_director: int) -> Iterator[dict[str, str]]:
    """`wms up` on a copy of config/ with the SiteDirector's period given, its
    HOME and SQLite under ``tmp_path``; the environment its commands need.
    Stopped with Ctrl-C at the end, which it must obey at once."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    wms_yaml = config / "wms.yaml"
    wms_yaml.write_text(wms_yaml.read_text().replace("  site_director: 60", f"  site_director: {site_director}"))
    port = free_port()
    (tmp_path / ".config" / "wms").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(tmp_path), "WMS_CONFIG": str(config), "WMS_URL": f"http://127.0.0.1:{port}",
           "WMS_DATABASE_URL": f"sqlite:///{tmp_path / 'up.db'}", "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("WMS_TOKEN", None)
    log = tmp_path / "up.log"
    with log.open("w") as out:
        up = subprocess.Popen([*WMS, "up", "--bind", f"127.0.0.1:{port}"], env=env, cwd=tmp_path, stdout=out,
                              stderr=subprocess.STDOUT, preexec_fn=interruptible)
    try:
        wait_for(env["WMS_URL"], up, log=log)
        yield env
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=patience(60)) == 0, log.read_text()


def readme_block(first: str) -> str:
    """The README's shell lines from the one starting with ``first`` to the end of its block."""
    readme = (REPO / "README.md").read_text()
    start = readme.index("\n" + first) + 1
    return readme[start:readme.index("```", start)]


def test_the_readme_says_to_put_the_commands_on_the_path_before_the_tour():
    readme = (REPO / "README.md").read_text()
    assert readme.index(". .venv/bin/activate") < readme.index("wms up &")


def test_the_readme_s_hand_started_pilot_runs_the_tour_s_jobs(tmp_path):
    """The README's recipe as a newcomer runs it, in order: its token, then
    its pilot, against `wms up`; the pilot runs the job of the user who ran
    `wms up` (the recipe's VO is theirs)."""
    with wms_up(tmp_path, site_director=3600) as env:
        job = tmp_path / "hello.jdl"
        job.write_text('[ Executable = "/bin/echo"; Arguments = "by hand"; CPUTime = 300; Site = "DIRAC.Local.ch"; ]')
        [job_id] = run("wms", "submit", str(job), env=env).stdout.split()
        recipe = readme_block("(umask 077; wms admin token create").splitlines()
        token_line = "\n".join(recipe[:2])
        [pilot_line] = [line for line in recipe if line.startswith("wms-pilot ")]
        assert recipe.index(pilot_line) > 1                         # the token is made first
        made = subprocess.run(["bash", "-c", token_line], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        pilot_run = subprocess.run(["bash", "-c", f"{pilot_line} --max-empty 1 --poll 0.2 --workdir {tmp_path}/wn"],
                                   env=env, cwd=tmp_path, capture_output=True, text=True, timeout=patience(120))
        assert pilot_run.returncode == 0, pilot_run.stderr
        [row] = json.loads(run("wms", "status", job_id, "--json", env=env).stdout)
        assert row["Status"] == "Done", pilot_run.stderr


def _gone(pid: int) -> bool:
    """The process has ended (a zombie nobody reaped has ended too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_wms_up_stops_its_local_pilots_when_it_stops(tmp_path):
    with wms_up(tmp_path, site_director=1) as env:
        job = tmp_path / "long.jdl"
        job.write_text('[ Executable = "/bin/sleep"; Arguments = "300"; CPUTime = 600; Site = "DIRAC.Local.ch"; ]')
        [job_id] = run("wms", "submit", str(job), env=env).stdout.split()

        def running_pilots() -> list[str]:
            [row] = json.loads(run("wms", "status", job_id, "--json", env=env).stdout)
            pilots = json.loads(run("wms", "pilots", "--json", env=env).stdout)
            return [p["BackendRef"] for p in pilots if p["BackendRef"]] if row["Status"] == "Running" else []

        refs = wait_until(running_pilots, timeout=90, what=f"job {job_id} running in a local pilot")
        wrappers = [int(ref.split(":")[1]) for ref in refs]
        pilots = [pid for pid in (pilot_process(ref) for ref in refs) if pid is not None]
    # Gone with the server, not 20-30 s later when their empty answers run out.
    assert all(_gone(pid) for pid in wrappers + pilots), log_tails([tmp_path / "up.log"])
