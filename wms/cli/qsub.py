"""qsub: Grid Engine's qsub(1) as a thin front end over POST /api/v1/jobs.

    qsub [-b y|n] [-h] [-l r=v,..] [-soft|-hard] [-q queues] [-N name] [-ar id] [-pe pe n]
         [-P project] [-t n[-m[:s]]] [-terse] [script|command [args ..]]

A script (or, with no script, standard input, as Grid Engine reads it) is
sent as the job's InputSandbox and runs as its Executable; ``-b y`` runs
a command found on the worker node instead, with nothing sent. The job is a
JDL made from the options, so everything `wms submit` checks is checked the
same way. ``-t`` makes an array a parametric job: one job per task, each
with ``SGE_TASK_ID`` in its environment. ``-h`` submits it held (a user
hold, released by qrls or `wms release`) in the submission's transaction.

Prints ``Your job ID ("NAME") has been submitted`` for each job (``-terse``:
the id alone). Exit status: 0 when submitted, 1 when the server refused
(nothing is stored), 2 for a wrong command line.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wms.cli.client import Client, ClientError, read_stdin
from wms.cli.main import ModeAction, RequestAction, submit_options
from wms.cli.program import UsageError, add_version, run_program
from wms.cli.sandboxes import LocalFileError, send_inputs
from wms.core.classad import render_record

#: -t n[-m[:s]]: Grid Engine's task range (first, last, step).
_TASKS_RE = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
#: The most tasks of one array: the server's max_jobs_per_submission bounds it again.
TASKS_MAX = 100_000


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> Parser:
    p = Parser(prog="qsub", add_help=False, allow_abbrev=False,
               description="Submit a batch job (Grid Engine's qsub(1)): a script, sent with the job, or with "
                           "-b y a command of the worker node; with neither, the script is read from standard "
                           "input.")
    p.add_argument("-help", action="help", help="print this help")
    add_version(p)
    p.add_argument("-b", dest="binary", choices=["y", "n"], default="n",
                   help="y: the command is a program of the worker node, not a script to send (default n)")
    p.add_argument("-h", dest="held", action="store_true", help="submit the job held (a user hold: qrls releases it)")
    p.add_argument("-l", metavar="r=v,..", action=RequestAction, help="resource requests (hard unless after -soft)")
    p.add_argument("-soft", nargs=0, action=ModeAction, help="following -l requests are soft")
    p.add_argument("-hard", nargs=0, action=ModeAction, help="following -l requests are hard (default)")
    p.add_argument("-q", dest="queues", action="append", metavar="wc_queue_list",
                   help="run only in these queues: Site/CE/Queue, comma-separated, wildcards allowed")
    p.add_argument("-N", dest="name", metavar="name", help="the job's name (default: the script's file name)")
    p.add_argument("-ar", type=int, metavar="ar_id", help="run inside advance reservation ar_id")
    p.add_argument("-pe", nargs=2, metavar=("pe_name", "slots"), help="parallel environment and slot count")
    p.add_argument("-P", dest="project", metavar="project_name", help="the job's project")
    p.add_argument("-t", dest="tasks", metavar="n[-m[:s]]",
                   help="an array job: one job per task n, n+s, .. up to m, each with SGE_TASK_ID set")
    p.add_argument("-terse", action="store_true", help="print only the job ids")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="[script|command [args ..]]",
                   help="the script (or with -b y the command) and its arguments")
    p.set_defaults(hard_requests=None, soft_requests=None, soft_mode=False)
    return p


def tasks(text: str) -> tuple[int, int, int]:
    """-t n[-m[:s]] as (first, count, step)."""
    match = _TASKS_RE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"-t {text!r}: expected n[-m[:s]], e.g. 1-10:2")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    step = int(match.group(3)) if match.group(3) else 1
    if first < 1 or last < first or step < 1:
        raise UsageError(f"-t {text}: the tasks run from n >= 1 up to m >= n, in steps s >= 1")
    count = (last - first) // step + 1
    if count > TASKS_MAX:
        raise UsageError(f"-t {text}: {count} tasks, more than {TASKS_MAX}")
    return first, count, step


def job_description(args: argparse.Namespace, script: Path | None) -> tuple[dict[str, Any], str]:
    """The JDL's attributes, and the job's name."""
    words = list(args.command)
    if args.binary == "y":
        if not words:
            raise UsageError("-b y: give the command to run")
        executable, arguments, name = words[0], words[1:], Path(words[0]).name
        attributes: dict[str, Any] = {"Executable": executable}
    else:
        assert script is not None
        arguments = words[1:]
        name = "STDIN" if not words else script.name
        attributes = {"Executable": script.name, "InputSandbox": [script.name]}
    if arguments:
        attributes["Arguments"] = shlex.join(arguments)
    name = args.name if args.name is not None else name
    attributes["JobName"] = name
    if args.tasks:
        first, count, step = tasks(args.tasks)
        attributes.update({"Parameters": count, "ParameterStart": first, "ParameterStep": step,
                           "ExecutionEnvironment": ["SGE_TASK_ID=%s"]})
    return attributes, name


def qsub(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = build_parser().parse_args(argv)
        with tempfile.TemporaryDirectory(prefix="qsub-") as scratch:
            script: Path | None = None
            if args.binary == "n":
                if args.command:
                    script = Path(args.command[0])
                    if not script.is_file():
                        raise UsageError(f"{script}: no such script file (with -b y a command of the worker "
                                         "node runs instead)")
                else:
                    script = Path(scratch) / "STDIN"
                    script.write_text(read_stdin())
            attributes, name = job_description(args, script)
            text = render_record(attributes)
            source = str(script) if script is not None else "<command line>"
            client = Client()
            try:
                sandboxes = send_inputs(client, [(source, source, text)])
            except LocalFileError as exc:
                raise UsageError(str(exc)) from None
        request: dict[str, Any] = {"jdls": [{"source": source, "text": text,
                                             **({"input_sandbox": sandboxes[0]} if sandboxes[0] else {})}],
                                   **submit_options(args)}
        if args.held:
            request["held"] = True
        result = client.post("/jobs", request)
        for warning in result.get("warnings") or []:
            print(f"qsub: warning: {warning}", file=sys.stderr)
        for job_id in result["job_ids"]:
            print(job_id if args.terse else f'Your job {job_id} ("{name}") has been submitted')
        return 0

    def guarded() -> int:
        try:
            return body()
        except UsageError as exc:
            print(f"qsub: {exc}", file=sys.stderr)
            return 2
        except ClientError as exc:
            print(f"qsub: {exc}", file=sys.stderr)
            return 1

    return run_program(guarded)


def main(argv: Sequence[str] | None = None) -> int:
    return qsub(argv)


if __name__ == "__main__":
    sys.exit(main())
