"""The sandbox, part by part, with real jobs run through bwrap (pilot/isolation.py,
docs/security.md "The worker node"): what a job sees, and that the limits,
signals, kill and accounting of pilot/runner.py work through it."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from pilot import runner
from pilot.isolation import (APPTAINER, BUBBLEWRAP, MODES, NONE, Isolation, bubblewrap_argv, command_argv, probe,
                             template_problem)
from pilot.runner import JobSpec, Limits
from tests.e2e.processes import missing_service
from tests.pilot.test_runner import alive, run, sh
from wms.core.pilot_backends import ISOLATION_MODES, backend_parameter_problem
from wms.core.resources import QueueRef
from wms.services.pilots import QueueLimits, pilot_argv

SANDBOX = Isolation(BUBBLEWRAP)


@pytest.fixture(autouse=True)
def bubblewrap():
    if shutil.which("bwrap") is None:
        missing_service("bubblewrap is not installed (`make test-packages` installs it)")


def isolated(job_id: int, script: str, tmp_path: Path, **kw):
    return run(sh(job_id, script, **kw), tmp_path, isolation=SANDBOX)


def lines(rec) -> list[str]:
    return rec.outputs[0][0].splitlines()


def test_the_job_sees_its_own_processes_its_directory_and_a_private_tmp(tmp_path):
    (tmp_path / "9").mkdir()
    (tmp_path / "9" / "secret").write_text("another job's")
    result, rec = isolated(1, 'ls -d /proc/[0-9]* | wc -l; echo "$HOME"; pwd; touch here /tmp/t && echo wrote; '
                              'touch /usr/x 2>/dev/null || echo read-only; ls ..; ls /tmp/t; '
                              'cat ../9/secret 2>/dev/null || echo no-neighbour; ls /home 2>/dev/null | wc -l; '
                              'cat ~/.config/wms/token /root/.config/wms/token 2>/dev/null | wc -c', tmp_path)
    assert result.status == "Done", result
    count, home, cwd, wrote, readonly, siblings, tmp, neighbour, homes, tokens = lines(rec)
    assert int(count) <= 4                         # bwrap's init, the shell, ls and wc at most
    assert home == cwd == str(tmp_path / "1") and wrote == "wrote" and readonly == "read-only"
    assert siblings == "1" and tmp == "/tmp/t" and neighbour == "no-neighbour" and homes == "0" and tokens == "0"
    assert (tmp_path / "1" / "here").exists()


def test_the_job_inherits_no_file_descriptor(tmp_path):
    leaked = open(tmp_path / "pilot-side", "w")        # an open file of the pilot's, inheritable
    try:
        os.set_inheritable(leaked.fileno(), True)
        result, rec = isolated(8, "ls /proc/self/fd", tmp_path)
    finally:
        leaked.close()
    assert result.status == "Done" and lines(rec) == ["0", "1", "2", "3"], rec.outputs   # 3: ls's own


def test_h_rt_and_cpu_time_end_a_sandboxed_job(tmp_path):
    result, _ = isolated(2, "sleep 30", tmp_path, limits=Limits(h_rt=1))
    assert (result.status, result.minor_status) == ("Failed", "Exceeded h_rt (1 s)")
    result, _ = isolated(3, "while :; do :; done", tmp_path, limits=Limits(cpu_time=1))
    assert (result.status, result.minor_status) == ("Failed", "Exceeded cpu_time (1 s)")
    assert result.cpu_seconds >= 0.8              # sampled from /proc: the sandbox's own account is lost


def test_s_rt_signals_the_job_not_the_sandbox(tmp_path):
    # SIGUSR1 would end bwrap and the sandbox with it: it reaches the job's
    # processes only, and a job that catches it finishes as it likes.
    script = "trap 'echo caught; exit 0' USR1; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    result, rec = isolated(4, script, tmp_path, limits=Limits(s_rt=1))
    assert (result.status, result.exit_code) == ("Done", 0) and lines(rec) == ["caught"], result


def test_a_job_killed_by_a_signal_is_reported_so(tmp_path):
    result, _ = isolated(5, "kill -TERM $$", tmp_path)
    assert (result.status, result.minor_status, result.exit_code) == ("Failed", "Killed by signal 15", 143)


def test_the_jobs_loader_and_path_variables_reach_its_program_not_the_sandboxs_start(tmp_path):
    # bwrap runs outside the sandbox with the pilot's rights. A job's
    # LD_PRELOAD (a library from its input sandbox) would run code there,
    # and a job's PATH would choose which "bwrap" starts. The loader says
    # "cannot be preloaded" once for each process that reads the variable:
    # here only the job's own shell.
    job_dir = tmp_path / "11"
    job_dir.mkdir()
    fake = job_dir / "bwrap"
    fake.write_text(f"#!/bin/sh\ntouch {tmp_path}/escaped\n")
    fake.chmod(0o755)
    environment = {"LD_PRELOAD": "/no/such/preload.so", "PATH": f"{job_dir}:/usr/bin:/bin",
                   "BASH_ENV": "/no/such/rc", "WANTED": "yes"}
    result, rec = isolated(11, 'echo "$LD_PRELOAD $PATH $BASH_ENV $WANTED"', tmp_path, environment=environment)
    assert result.status == "Done", result
    assert lines(rec) == [f"/no/such/preload.so {job_dir}:/usr/bin:/bin /no/such/rc yes"]
    said = rec.outputs[0][1]
    assert said.count("cannot be preloaded") == 1, said
    assert not (tmp_path / "escaped").exists()


def test_the_start_of_a_sandbox_gets_the_pilots_path_and_none_of_the_jobs_loader_variables(tmp_path):
    env = {"PATH": "/job/bin", "LD_LIBRARY_PATH": "/job/lib", "BASH_FUNC_read%%": "() { :; }", "HOME": "/j"}
    launch = SANDBOX.launch(["prog"], tmp_path, env)
    command, outside = launch.argv, launch.env
    assert outside["PATH"] == os.environ["PATH"] and outside["HOME"] == "/j"
    assert not any(name.startswith(("LD_", "BASH_FUNC_")) for name in outside)
    assert os.path.isabs(command[0]) and command[-2:] == ["--", "prog"]
    settings = command[command.index("--setenv"):-2]
    assert settings == ["--setenv", "PATH", "/job/bin", "--setenv", "LD_LIBRARY_PATH", "/job/lib",
                        "--setenv", "BASH_FUNC_read%%", "() { :; }"]
    site = Isolation(APPTAINER, command="bwrap --bind {job_dir} {job_dir}", image="unused")
    launch = site.launch(["prog"], tmp_path, env)
    command, outside = launch.argv, launch.env
    assert os.path.isabs(command[0]) and "LD_LIBRARY_PATH" not in outside
    assert outside["APPTAINERENV_LD_LIBRARY_PATH"] == "/job/lib" and outside["APPTAINERENV_PATH"] == "/job/bin"


def test_bwraps_options_go_through_its_args_pipe_and_the_command_stays_on_its_command_line(tmp_path):
    # bwrap ignores a command in its --args: it reads options only.
    env = {"PATH": "/job/bin", "LD_PRELOAD": "/job/lib.so", "HOME": "/j"}
    piped = SANDBOX.launch(["prog", "arg"], tmp_path, env, args_fd=7)
    plain = SANDBOX.launch(["prog", "arg"], tmp_path, env)
    assert piped.argv == [plain.argv[0], "--args", "7", "--", "prog", "arg"] and piped.env == plain.env
    assert plain.argv == [plain.argv[0], *piped.args, "--", "prog", "arg"] and plain.args == ()
    # The namespaces first: options cut short leave no sandbox without them.
    assert piped.args[:3] == ("--unshare-all", "--share-net", "--die-with-parent")
    assert piped.args_data() == b"".join(word.encode() + b"\0" for word in piped.args)
    # A NUL would split one value into options of the job's choosing.
    smuggled = SANDBOX.launch(["prog"], tmp_path, {"LD_PRELOAD": "x\0--bind\0/\0/host"}, args_fd=7)
    with pytest.raises(ValueError, match="embedded null byte"):
        smuggled.args_data()
    # The other modes keep everything on the command line (the runner's shell gate).
    site = Isolation(APPTAINER, command="apptainer exec {image}", image="i")
    assert Isolation(NONE).launch(["prog"], tmp_path, env, args_fd=7).args == ()
    assert site.launch(["prog"], tmp_path, env, args_fd=7).args == ()


def test_a_sandboxed_job_reads_dev_null_inherits_no_args_pipe_and_has_its_cpu_limit(tmp_path):
    script = "readlink /proc/self/fd/0; ls /proc/self/fd | tr '\\n' ' '; echo; ulimit -St; ulimit -Ht"
    result, rec = isolated(12, script, tmp_path, limits=Limits(cpu_time=30))
    assert result.status == "Done", rec.outputs
    assert lines(rec) == ["/dev/null", "0 1 2 3 ", "30", "31"]     # 3: ls's own; hard: cpu_time + grace


def held_sandbox(job_dir: Path, script: str) -> tuple[subprocess.Popen[bytes], int, bytes]:
    """bwrap started as the runner starts it, its options not yet written:
    the process, the write end of its --args pipe, and the options."""
    args_read, args_write = os.pipe()
    launch = SANDBOX.launch(["/bin/sh", "-c", script], job_dir, {"PATH": "/usr/bin:/bin"}, args_fd=args_read)
    started = subprocess.Popen(launch.argv, env=launch.env, cwd=job_dir, stdin=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, pass_fds=(args_read,), start_new_session=True)
    os.close(args_read)
    return started, args_write, launch.args_data()


def test_bwrap_waits_for_its_options_and_runs_nothing_without_them(tmp_path):
    """The gate of a sandboxed job: bwrap does nothing until the pilot has
    written its options (the pilot registers the job's session and sets its
    CPU limit meanwhile); a pilot gone before writing them, or in the
    middle of an option, leaves a bwrap that runs nothing and ends."""
    job_dir = tmp_path / "13"
    job_dir.mkdir()
    marker = job_dir / "ran"
    started, args_write, data = held_sandbox(job_dir, f"touch {marker}")
    time.sleep(0.5)
    assert started.poll() is None and not marker.exists()
    assert Path(f"/proc/{started.pid}/task/{started.pid}/children").read_text() == ""   # no sandbox yet
    os.write(args_write, data)
    os.close(args_write)
    assert started.wait(timeout=60) == 0 and marker.exists()
    marker.unlink()
    # Nothing written: bwrap has the command but no options, and its bare
    # sandbox an empty root where no program is found. Cut in an option: refused.
    for written, said in ((b"", "bwrap: execvp /bin/sh: No such file or directory"),
                          (data[:data.index(b"--share-net") + 7], "bwrap: Unknown option --share")):
        started, args_write, _ = held_sandbox(job_dir, f"touch {marker}")
        os.write(args_write, written)
        os.close(args_write)
        _, err = started.communicate(timeout=60)
        assert started.returncode == 1 and err.decode().splitlines() == [said] and not marker.exists()


# Launch variables, which bwrap gets through --setenv: more than a pipe holds (64 KiB).
BULKY_ENVIRONMENT = {f"LD_WMS_{i}": "x" * 4000 for i in range(40)}


def test_options_larger_than_the_pipe_reach_bwrap_whole(tmp_path):
    result, rec = isolated(14, 'env | grep -c "^LD_WMS_.*=x*$"', tmp_path, environment=BULKY_ENVIRONMENT)
    assert result.status == "Done" and lines(rec) == ["40"], rec.outputs


def test_a_nul_in_a_launch_variable_refuses_the_start(tmp_path):
    spec = sh(15, f"touch {tmp_path}/ran", environment={"LD_LIBRARY_PATH": "/lib\0--bind\0/\0/host"})
    result, rec = run(spec, tmp_path, isolation=SANDBOX)
    assert (result.status, result.minor_status) == ("Failed", "Cannot start: embedded null byte")
    assert rec.kinds == ["Running", "Failed"] and not (tmp_path / "ran").exists()


def test_a_bwrap_that_ends_or_stalls_before_reading_its_options_is_a_failed_start(tmp_path, monkeypatch):
    """With more options than the pipe holds, the pilot waits for bwrap to
    read them: never for ever, and a bwrap gone is a start that failed."""
    fake = tmp_path / "fake-bwrap"
    fake.write_text(f"#!/bin/sh\necho $$ > {tmp_path}/fake.pid\n[ \"$WMS_FAKE\" = stall ] && exec sleep 300\nexit 0\n")
    fake.chmod(0o755)
    for job_id, behaviour, timeout, minor in (
            (16, "end", 60.0, "the job's first process ended before it was let go"),
            (17, "stall", 2.0, "the job's first process read nothing for 2 s")):
        monkeypatch.setattr(runner, "GATE_TIMEOUT", timeout)
        spec = sh(job_id, "true", environment={**BULKY_ENVIRONMENT, "WMS_FAKE": behaviour})
        result, rec = run(spec, tmp_path, isolation=Isolation(BUBBLEWRAP, bwrap=str(fake)))
        assert (result.status, result.minor_status) == ("Failed", f"Cannot start: {minor}")
        assert rec.kinds == ["Running", "Failed"]
        assert not alive(int((tmp_path / "fake.pid").read_text()))


def test_a_program_the_sandbox_cannot_start(tmp_path):
    result, _ = run(JobSpec(job_id=6, executable="/no/such/program"), tmp_path, isolation=SANDBOX)
    assert (result.status, result.minor_status) == ("Failed", "Cannot start: execvp /no/such/program: "
                                                              "No such file or directory")


def test_a_sites_command_template_runs_the_job(tmp_path):
    # Apptainer is not packaged for this machine: the template machinery runs
    # with bwrap as the site's command, and the job's environment comes in
    # both plainly and as APPTAINERENV_* (what --containall lets through).
    template = " ".join(bubblewrap_argv(Path("{job_dir}")))
    site = Isolation(APPTAINER, command=template, image="unused")
    result, rec = run(sh(7, 'echo "$WMS_JOB_ID $APPTAINERENV_WMS_JOB_ID"; ls -d /proc/[0-9]* | wc -l'), tmp_path,
                      isolation=site)
    assert result.status == "Done", result
    ids, count = lines(rec)
    assert ids == "7 7" and int(count) <= 4


def test_the_default_apptainer_command():
    argv = command_argv(Isolation(APPTAINER).command, Path("/w/7"), "/cvmfs/unpacked.cern.ch/el9")
    assert argv == ["apptainer", "exec", "--containall", "--no-home", "--bind", "/w/7", "--pwd", "/w/7",
                    "/cvmfs/unpacked.cern.ch/el9"]
    assert template_problem("apptainer exec 'unclosed") == "cannot split it like a shell line: No closing quotation"
    assert template_problem("  ") == "it is empty"


def test_the_probe_says_why_a_sandbox_cannot_be_made(tmp_path):
    assert probe(SANDBOX, tmp_path) is None
    assert probe(Isolation(NONE), tmp_path) is None
    assert probe(Isolation(bwrap="/no/bwrap"), tmp_path) == "/no/bwrap is not installed (not found on PATH)"
    refused = probe(Isolation(APPTAINER, command="sh -c 'echo no user namespaces >&2; exit 1'"), tmp_path)
    assert refused == "sh failed (no user namespaces)"


def test_what_each_mode_says_of_itself():
    assert SANDBOX.describe() == "bubblewrap (bwrap)"
    assert Isolation(BUBBLEWRAP, paths=("/data",)).describe() == "bubblewrap (bwrap, also /data)"
    assert Isolation(NONE, note="chosen with --isolation none").describe() == \
        "none: payloads run beside the pilot (chosen with --isolation none)"


def test_the_queue_parameters_name_the_same_modes():
    assert ISOLATION_MODES == MODES
    assert backend_parameter_problem("Isolation", "docker") == \
        "expected one of bubblewrap, apptainer, none, got 'docker'"
    assert backend_parameter_problem("IsolationPaths", ["/data", "relative"]) == \
        "expected absolute paths (a list, or one string with commas), got ['/data', 'relative']"
    assert backend_parameter_problem("IfNoIsolation", "maybe") == "expected one of owner, run, got 'maybe'"
    assert backend_parameter_problem("JobEnv", "X509_*,SITE_NAME") is None
    assert backend_parameter_problem("IsolationCommand", "apptainer exec\nrm -rf /") == \
        "expected a command template on one line, got 'apptainer exec\\nrm -rf /'"


def test_a_queues_isolation_reaches_its_pilots_command_line():
    params = {"Isolation": "apptainer", "IsolationImage": "/cvmfs/unpacked.cern.ch/el9",
              "IsolationPaths": ["/cvmfs", "/data"], "JobEnv": "X509_*", "NumberOfProcessors": 4}
    argv = pilot_argv(QueueRef("S", "C", "Q"), ["p1"], params, QueueLimits.of(params), emulates_queue=False)
    assert argv[argv.index("--isolation") + 1] == "apptainer" and argv[argv.index("--slots") + 1] == "4"
    assert argv[argv.index("--isolation-image") + 1] == "/cvmfs/unpacked.cern.ch/el9"
    assert argv[argv.index("--isolation-paths") + 1] == "/cvmfs,/data" and argv[argv.index("--job-env") + 1] == "X509_*"
    plain = pilot_argv(QueueRef("S", "C", "Q"), [], {}, QueueLimits.of({}), emulates_queue=False)
    assert not [word for word in plain if "isolation" in word]      # the pilot's default: bubblewrap


def test_a_sandboxed_job_sets_its_application_status_with_the_pilots_helper(tmp_path):
    # The pilot's package is in the sandbox, read-only, at $WMS_PILOT_PATH;
    # the helper reads WMS_URL, WMS_JOB_ID and WMS_JOB_TOKEN (here a server
    # nobody listens on: the helper's "unreachable" exit status, 3).
    script = ('PYTHONPATH=$WMS_PILOT_PATH python3 -m pilot.job_status "half way" 2>/dev/null; echo "exit $?"; '
              'echo "$WMS_PILOT_PATH"; touch $WMS_PILOT_PATH/pilot/x 2>/dev/null || echo read-only')
    spec = dataclasses.replace(sh(9, script), job_token="wmsj_9.1.abc")
    result, rec = run(spec, tmp_path, isolation=SANDBOX,
                      base_env={"PATH": "/usr/bin:/bin", "WMS_URL": "http://127.0.0.1:9/api/v1"})
    assert result.status == "Done" and lines(rec) == ["exit 3", "/wms-pilot", "read-only"], rec.outputs
