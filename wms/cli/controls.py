"""The job controls: `wms hold`, `wms release`, `wms reschedule`, and Grid Engine's qhold and qrls.

Thin clients of POST /jobs/hold, /jobs/release and /jobs/reschedule. Each takes job ids or a
filter; a filter's jobs come a batch at a time (the answer's
``next_after``), so this loops until the server says there are no more.
Jobs that could not be changed are named on stderr with the reason, and the
exit status is 1 (Grid Engine's qhold and qrls exit non-zero as well).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from wms.cli import output
from wms.cli.client import Client, ClientError
from wms.cli.main import RequestAction, job_ids, queue_request
from wms.cli.program import UsageError, add_version, run_program

HOLD_TYPES_HELP = "u (user), o (operator: operators and managers), s (system: managers)"


def send(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to a job control; a filter's batches merged into one answer."""
    client = Client()
    merged: dict[str, Any] = {}
    while True:
        answer = client.post(path, body)
        for key, value in answer.items():
            if isinstance(value, list):
                merged.setdefault(key, []).extend(value)
            elif isinstance(value, dict):
                merged.setdefault(key, {}).update(value)
        if answer.get("next_after") is None:
            break
        body = {**body, "after": answer["next_after"]}
    merged["next_after"] = None
    return merged


def selection(ids: Sequence[str], status: str | None, owner: str | None) -> dict[str, Any]:
    """The request body's jobs: ids, or a filter."""
    if ids and (status or owner):
        raise UsageError("give job ids or a filter (--status, --owner), not both")
    if ids:
        return {"job_ids": job_ids(ids)}
    if not (status or owner):
        raise UsageError("give job ids, or a filter: --status S, --owner U (operators)")
    return {k: v for k, v in (("status", status), ("owner", owner)) if v}


def hold_types(text: str | None) -> str | None:
    """A -h / --type value: letters of u, o, s, commas allowed (u,o)."""
    if text is None:
        return None
    letters = "".join(text.replace(",", "").split())
    if not letters or any(c not in "uos" for c in letters) or len(set(letters)) != len(letters):
        raise UsageError(f"hold types {text!r}: give letters of u, o, s, each once ({HOLD_TYPES_HELP})")
    return letters


def report(done: dict[str, str], refused: dict[str, str]) -> int:
    """``done`` (job id -> what happened) on stdout, ``refused`` (job id -> why) on stderr."""
    for job_id, line in done.items():
        print(line)
    for job_id, why in sorted(refused.items(), key=lambda item: int(item[0])):
        print(f"job {job_id}: {why}", file=sys.stderr)
    return 1 if refused else 0


# ---------------------------------------------------------------- wms hold / release / reschedule / delete
def control(args: argparse.Namespace, path: str, body: dict[str, Any], done: str, refused: str, verb: str,
            more: dict[str, str] | None = None) -> int:
    """One job control: ``body`` (and ``--reason``) to ``path``; the jobs of
    ``result[done]`` said to be ``verb``, those of ``result[refused]`` on
    stderr; exit 1 when any was refused."""
    if args.reason:
        body["reason"] = args.reason
    result = send(path, body)
    if args.json:
        output.as_json(result)
        return 1 if result[refused] else 0
    lines = {str(i): f"{i} {verb}" for i in result[done]}
    lines.update({i: line.format(id=i, minor=minor) for key, line in (more or {}).items()
                  for i, minor in result[key].items()})
    return report(lines, result[refused])


def cmd_hold(args: argparse.Namespace) -> int:
    body = {**selection(args.ids, args.status, args.owner), "hold_types": hold_types(args.type) or "u"}
    return control(args, "/jobs/hold", body, "held", "not_held", "held")


def cmd_release(args: argparse.Namespace) -> int:
    body = selection(args.ids, args.status, args.owner)
    if args.type:
        body["hold_types"] = hold_types(args.type)
    return control(args, "/jobs/release", body, "released", "not_released", "released",
                   more={"still_held": "{id} still held: {minor}"})


def cmd_reschedule(args: argparse.Namespace) -> int:
    body = selection(args.ids, args.status, args.owner)
    if args.reset:
        body["reset"] = True
    if args.running:
        body["running"] = True
    return control(args, "/jobs/reschedule", body, "rescheduled", "not_rescheduled", "rescheduled")


def cmd_delete(args: argparse.Namespace) -> int:
    return control(args, "/jobs/delete", selection(args.ids, args.status, args.owner), "deleted", "not_deleted",
                   "deleted")


def cmd_alter(args: argparse.Namespace) -> int:
    body = selection(args.ids, args.status, args.owner)
    change: dict[str, Any] = {}
    if args.priority is not None:
        change["priority"] = args.priority
    if args.hard_requests:
        change["resource_requests"] = args.hard_requests
    if args.queues:
        change["queues"] = queue_request(args.queues).split("|")
    if args.name is not None:
        change["job_name"] = args.name
    if not change:
        raise UsageError("nothing to alter: give -p, -l, -q or -N")
    if args.reason:
        body["reason"] = args.reason
    result = send("/jobs/alter", {**body, **change})
    if args.json:
        output.as_json(result)
        return 1 if result["not_altered"] else 0
    return report({str(i): f"{i} altered" for i in result["altered"]}, result["not_altered"])


def add_commands(command: Any) -> None:
    """`wms hold` and `wms release`, added with main's ``command(name, func, help)``."""
    for name, func, text, states in (
        ("hold", cmd_hold, "hold jobs that have not started (Waiting, Matched): none runs until every hold on it is released (qhold)",
         "Waiting or Held"),
        ("release", cmd_release, "release holds on jobs; a job whose last hold goes waits again (qrls)", "Held"),
    ):
        p = command(name, func, text)
        p.add_argument("ids", nargs="*", metavar="ID", help="job ids (or a filter: --status, --owner)")
        p.add_argument("--status", help=f"every job in this state ({states}) of yours, or for operators of anyone")
        p.add_argument("--owner", metavar="U", help="every job of user U (operators and managers)")
        p.add_argument("--type", metavar="u|o|s", help=f"hold types: {HOLD_TYPES_HELP}; default: " + (
            "u" if name == "hold" else "every kind you may release"))
        p.add_argument("--reason", metavar="TEXT", help="why, recorded in the job's history")
    p = command("reschedule", cmd_reschedule, "run ended jobs (Done, Failed, Killed, Stalled) again as a new attempt, "
                "at most max_reschedule times (dirac-wms-job-reschedule)")
    p.add_argument("ids", nargs="*", metavar="ID", help="job ids (or a filter: --status, --owner)")
    p.add_argument("--status", help="every job in this state (Done, Failed, Killed or Stalled) of yours, or for "
                                    "operators of anyone")
    p.add_argument("--owner", metavar="U", help="every job of user U (operators and managers)")
    p.add_argument("--reset", action="store_true",
                   help="start the job's reschedule count again (operators and managers)")
    p.add_argument("--running", action="store_true",
                   help="Matched and Running jobs too (qmod -rj): each waits again at once, and its pilot stops "
                        "the payload at its next heartbeat")
    p.add_argument("--reason", metavar="TEXT", help="why, recorded in the job's history")
    p = command("alter", cmd_alter, "change Waiting or Held jobs (qalter): priority, -l requests, queues, name; "
                "each is filed again into its task queue and SubmitPool")
    p.add_argument("ids", nargs="*", metavar="ID", help="job ids (or a filter: --status, --owner)")
    p.add_argument("-p", dest="priority", type=int, metavar="PRIO", help="the job's Priority")
    p.add_argument("-l", metavar="r=v,..", action=RequestAction, help="hard resource requests, merged with the job's")
    p.add_argument("-q", dest="queues", action="append", metavar="QUEUES",
                   help="run only in these queues: Site/CE/Queue, comma-separated, wildcards allowed")
    p.add_argument("-N", dest="name", metavar="NAME", help="job name")
    p.add_argument("--status", help="every job in this state (Waiting or Held) of yours, or for operators of anyone")
    p.add_argument("--owner", metavar="U", help="every job of user U (operators and managers)")
    p.add_argument("--reason", metavar="TEXT", help="why, recorded in the job's history")
    p.set_defaults(hard_requests=None, soft_requests=None, soft_mode=False)
    p = command("delete", cmd_delete, "delete jobs: they leave every list (those not ended are killed first) and "
                "are purged with their output and sandboxes after deleted_job_retention (dirac-wms-job-delete)")
    p.add_argument("ids", nargs="*", metavar="ID", help="job ids (or a filter: --status, --owner)")
    p.add_argument("--status", help="every job in this state of yours, or for operators of anyone")
    p.add_argument("--owner", metavar="U", help="every job of user U (operators and managers)")
    p.add_argument("--reason", metavar="TEXT", help="why, recorded in the job's history")


# ---------------------------------------------------------------- qhold / qrls
class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def grid_engine_parser(prog: str) -> Parser:
    verb = {"qhold": "Hold", "qrls": "Release holds on"}[prog]
    p = Parser(prog=prog, add_help=False, allow_abbrev=False,
               description=f"{verb} pending jobs (Grid Engine's {prog}(1)); -h defaults to u.")
    p.add_argument("-help", action="help", help="print this help")
    add_version(p)
    p.add_argument("-h", dest="hold_types", metavar="{u|o|s},...", default="u",
                   help=f"hold types: {HOLD_TYPES_HELP}; default u")
    p.add_argument("-u", dest="users", metavar="user_list", action="append",
                   help="every job of these users (comma-separated; other users' jobs: operators and managers)")
    p.add_argument("jobs", nargs="*", metavar="job_id_list", help="job ids, separated by commas or blanks")
    return p


def qhold_parser() -> Parser:
    return grid_engine_parser("qhold")


def qrls_parser() -> Parser:
    return grid_engine_parser("qrls")


def grid_engine(prog: str, argv: Sequence[str] | None) -> int:
    path, changed, refused = {"qhold": ("/jobs/hold", "held", "not_held"),
                              "qrls": ("/jobs/release", "released", "not_released")}[prog]

    def body() -> int:
        args = grid_engine_parser(prog).parse_args(argv)
        bodies = _jobs_or_users(args)
        types = hold_types(args.hold_types)
        done: dict[str, str] = {}
        failed: dict[str, str] = {}
        for request in bodies:
            result = send(path, {**request, "hold_types": types})
            done.update({str(i): f"modified hold of job {i}" for i in result[changed]})
            done.update({i: f"modified hold of job {i}" for i in result.get("still_held", {})})
            failed.update(result[refused])
        return report(done, failed)

    return _grid_engine_run(prog, body)


def _grid_engine_run(prog: str, body: Any) -> int:
    def guarded() -> int:
        try:
            return body()
        except UsageError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        except ClientError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 1

    return run_program(guarded)


def _jobs_or_users(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The request bodies of a job_id_list, or of -u user_list (one per user)."""
    ids = [i for value in args.jobs for i in value.split(",") if i]
    users = [u for value in args.users or [] for u in value.split(",") if u]
    if ids and users:
        raise UsageError("give a job_id_list or -u user_list, not both")
    if not ids and not users:
        raise UsageError("give a job_id_list or -u user_list")
    return [{"job_ids": job_ids(ids)}] if ids else [{"owner": user} for user in users]


def qdel_parser() -> Parser:
    p = Parser(prog="qdel", add_help=False, allow_abbrev=False,
               description="Delete jobs (Grid Engine's qdel(1)): those not ended are killed first (wms delete).")
    p.add_argument("-help", action="help", help="print this help")
    add_version(p)
    p.add_argument("-f", action="store_true", help="accepted for Grid Engine's scripts: deletion is always forced")
    p.add_argument("-u", dest="users", metavar="wc_user_list", action="append",
                   help="every job of these users (comma-separated; other users' jobs: operators and managers)")
    p.add_argument("jobs", nargs="*", metavar="job_task_list", help="job ids, separated by commas or blanks")
    return p


def qdel(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = qdel_parser().parse_args(argv)
        bodies = _jobs_or_users(args)
        client = Client()
        user = client.get("/whoami")["User"]
        done: dict[str, str] = {}
        failed: dict[str, str] = {}
        for request in bodies:
            result = send("/jobs/delete", request)
            done.update({str(i): f"{user} has deleted job {i}" for i in result["deleted"]})
            failed.update(result["not_deleted"])
        return report(done, failed)

    return _grid_engine_run("qdel", body)


def qalter_parser() -> Parser:
    p = Parser(prog="qalter", add_help=False, allow_abbrev=False,
               description="Change pending jobs (Grid Engine's qalter(1)): Waiting or Held jobs, filed again.")
    p.add_argument("-help", action="help", help="print this help")
    add_version(p)
    p.add_argument("-p", dest="priority", type=int, metavar="priority", help="the job's priority")
    p.add_argument("-l", dest="requests", action="append", metavar="resource_list",
                   help="hard resource requests (name=value,...), merged with the job's")
    p.add_argument("-q", dest="queues", action="append", metavar="wc_queue_list", help="the hard queue list")
    p.add_argument("-N", dest="name", metavar="name", help="the job's name")
    p.add_argument("-u", dest="users", metavar="wc_user_list", action="append",
                   help="every pending job of these users (other users' jobs: operators and managers)")
    p.add_argument("jobs", nargs="*", metavar="job_task_list", help="job ids, separated by commas or blanks")
    return p


def qalter(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from wms.cli.main import parse_requests

        args = qalter_parser().parse_args(argv)
        change: dict[str, Any] = {}
        said = []
        if args.priority is not None:
            change["priority"] = args.priority
            said.append("priority")
        if args.requests:
            change["resource_requests"] = {k: v for value in args.requests for k, v in parse_requests(value).items()}
            said.append("hard resource list")
        if args.queues:
            change["queues"] = queue_request(args.queues).split("|")
            said.append("hard queue list")
        if args.name is not None:
            change["job_name"] = args.name
            said.append("job name")
        if not change:
            raise UsageError("nothing to change: give -p, -l, -q or -N")
        done: dict[str, str] = {}
        failed: dict[str, str] = {}
        for request in _jobs_or_users(args):
            result = send("/jobs/alter", {**request, **change})
            done.update({str(i): "\n".join(f"modified {what} of job {i}" for what in said) for i in result["altered"]})
            failed.update(result["not_altered"])
        return report(done, failed)

    return _grid_engine_run("qalter", body)


def qmod_parser() -> Parser:
    p = Parser(prog="qmod", add_help=False, allow_abbrev=False,
               description="Reschedule jobs (Grid Engine's qmod(1) -rj): a running job is stopped by its pilot "
                           "and waits again as a new attempt, as does an ended one (wms reschedule --running).")
    p.add_argument("-help", action="help", help="print this help")
    add_version(p)
    p.add_argument("-f", action="store_true", help="accepted for Grid Engine's scripts: rescheduling is always forced")
    p.add_argument("-rj", dest="jobs", action="append", required=True, metavar="job_list",
                   help="the jobs to reschedule (comma-separated, or several -rj)")
    return p


def qmod(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = qmod_parser().parse_args(argv)
        ids = [i for value in args.jobs for i in value.split(",") if i]
        if not ids:
            raise UsageError("-rj: give the jobs to reschedule")
        result = send("/jobs/reschedule", {"job_ids": job_ids(ids), "running": True})
        return report({str(i): f"job {i} has been rescheduled" for i in result["rescheduled"]},
                      result["not_rescheduled"])

    return _grid_engine_run("qmod", body)


def qhold(argv: Sequence[str] | None = None) -> int:
    return grid_engine("qhold", argv)


def qrls(argv: Sequence[str] | None = None) -> int:
    return grid_engine("qrls", argv)
