"""qstat: Grid Engine's qstat(1) as a thin front end over GET /api/v1/jobs.

    qstat [-u user_list] [-f] [-xml]
    qstat -j job_list [-xml]

Without ``-j`` it lists the jobs not yet ended (ended jobs leave qstat's
list, as in Grid Engine) of the caller, or of the users of ``-u`` (``*``:
every user whose jobs the caller sees), with Grid Engine's state letters:
``qw`` waiting (Received, Checking and Waiting), ``hqw`` held, ``t``
matched (handed to a pilot, not yet started), ``r`` running, ``s``
stalled (no heartbeat: the job is not seen progressing). ``-f`` groups the
running jobs under their queue and the pending ones after them. ``-j``
prints each job's details and the scheduling info: `wms why`'s table, or
a held job's holds. ``-xml`` prints the same as an XML document.

Exit status: 0; 1 when a job of ``-j`` does not exist (``Following jobs do
not exist``) or the server refused; 2 for a wrong command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any
from xml.etree import ElementTree

from wms.cli.client import Client, ClientError
from wms.cli.program import UsageError, add_version, run_program

#: Grid Engine's state letters for the states qstat lists.
STATE_LETTERS = {"Received": "qw", "Checking": "qw", "Waiting": "qw", "Held": "hqw", "Matched": "t",
                 "Running": "r", "Stalled": "s"}
PENDING = frozenset({"qw", "hqw"})
COLUMNS = ("job-ID", "prior", "name", "user", "state", "submit/start at", "queue", "slots")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> Parser:
    p = Parser(prog="qstat", add_help=False, allow_abbrev=False,
               description="Show the jobs not yet ended (Grid Engine's qstat(1)); -j: one job's details and why "
                           "it waits.")
    p.add_argument("-help", action="help", help="print this help")
    add_version(p)
    p.add_argument("-u", dest="users", metavar="user_list", action="append",
                   help="the jobs of these users (comma-separated; '*': every user whose jobs you see); "
                        "default: your own")
    p.add_argument("-j", dest="jobs", metavar="job_list", action="append",
                   help="details of these jobs (comma-separated) and the scheduling info: why each waits")
    p.add_argument("-f", dest="full", action="store_true",
                   help="full format: the running jobs under their queue, then the pending jobs")
    p.add_argument("-xml", action="store_true", help="display the information in XML")
    return p


def job_ids(values: Iterable[str]) -> list[int]:
    ids = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item.isdigit() or int(item) < 1:
                raise UsageError(f"-j: not a job id: {item!r}")
            ids.append(int(item))
    return ids


def listed(client: Client, users: list[str] | None) -> list[dict[str, Any]]:
    """The jobs not yet ended of the users asked for, by job id."""
    if not users:
        users = [client.get("/whoami")["User"]]
    owners: list[str | None] = [None] if "*" in users else list(dict.fromkeys(users))
    rows: dict[int, dict[str, Any]] = {}
    for owner in owners:
        for page in client.pages("/jobs", owner=owner):
            rows.update({row["JobID"]: row for row in page if row["Status"] in STATE_LETTERS})
    return [rows[job_id] for job_id in sorted(rows)]


def _cells(row: dict[str, Any]) -> list[str]:
    state = STATE_LETTERS[row["Status"]]
    when = row["SubmissionTime"] if state in PENDING else row["LastUpdateTime"]
    return [str(row["JobID"]), str(row["Priority"]), row["JobName"] or "-", row["Owner"], state,
            when.replace("T", " ")[:19], row["Queue"], "1"]


def text_list(rows: list[dict[str, Any]], full: bool) -> str:
    if not rows:
        return ""
    cells = [_cells(row) for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(COLUMNS)]

    def line(values: Sequence[str]) -> str:
        return " ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    rule = "-" * len(line(COLUMNS))
    out = [line(COLUMNS), rule]
    if not full:
        return "\n".join(out + [line(c) for c in cells]) + "\n"
    started = [c for c in cells if c[4] not in PENDING]
    for queue in sorted({c[6] for c in started}):
        out += [queue, *(line(c) for c in started if c[6] == queue), rule]
    pending = [c for c in cells if c[4] in PENDING]
    if pending:
        out += ["", "#" * len(rule), " - PENDING JOBS - PENDING JOBS - PENDING JOBS - PENDING JOBS",
                "#" * len(rule), *(line(c) for c in pending)]
    return "\n".join(out) + "\n"


def _add(parent: ElementTree.Element, tag: str, text: Any) -> None:
    ElementTree.SubElement(parent, tag).text = "" if text is None else str(text)


def xml_list(rows: list[dict[str, Any]]) -> str:
    """Grid Engine's qstat -xml document: running jobs under queue_info, pending ones under job_info."""
    root = ElementTree.Element("job_info")
    running, pending = ElementTree.SubElement(root, "queue_info"), ElementTree.SubElement(root, "job_info")
    for row in rows:
        state = STATE_LETTERS[row["Status"]]
        waiting = state in PENDING
        job = ElementTree.SubElement(pending if waiting else running, "job_list",
                                     state="pending" if waiting else "running")
        _add(job, "JB_job_number", row["JobID"])
        _add(job, "JAT_prio", row["Priority"])
        _add(job, "JB_name", row["JobName"])
        _add(job, "JB_owner", row["Owner"])
        _add(job, "state", state)
        if waiting:
            _add(job, "JB_submission_time", row["SubmissionTime"])
        else:
            _add(job, "JAT_start_time", row["LastUpdateTime"])
            _add(job, "queue_name", row["Queue"])
        _add(job, "slots", 1)
    return _document(root)


def _document(root: ElementTree.Element) -> str:
    ElementTree.indent(root)
    return "<?xml version='1.0'?>\n" + ElementTree.tostring(root, encoding="unicode") + "\n"


def details(client: Client, ids: list[int]) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[int]]:
    """(job, why) for each job that exists; the ids that do not."""
    found, missing = [], []
    for job_id in dict.fromkeys(ids):
        try:
            found.append((client.get(f"/jobs/{job_id}"), client.get(f"/jobs/{job_id}/why")))
        except ClientError as exc:
            if exc.status != 404:
                raise
            missing.append(job_id)
    return found, missing


def scheduling_info(why: dict[str, Any]) -> list[str]:
    """The why table as lines: a held job's holds, else each queue's verdict, then the summary."""
    lines = [f"held ({h['Type']}) by {h['Holder']}" + (f": {h['Reason']}" if h.get("Reason") else "")
             for h in why.get("Holds") or []]
    lines += [f"queue {q['Queue']}: {q['Layer']}: {q['Reason']}" for q in why["Queues"]]
    return lines + [why["Summary"]]


def text_details(found: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    out = []
    for job, why in found:
        fields = [("job_number", job["JobID"]), ("job_name", job["JobName"]), ("owner", job["Owner"]),
                  ("group", job["OwnerGroup"]), ("submission_time", job["SubmissionTime"]),
                  ("priority", job["Priority"]), ("job_state", f"{job['Status']} ({job['MinorStatus']})"),
                  ("site", job["Site"]), ("queue", job["Queue"]), ("submit_pool", job["SubmitPool"]),
                  ("ar_id", job["AR"])]
        out.append("=" * 62)
        out += [f"{name + ':':<28}{'' if value is None else value}" for name, value in fields]
        info = scheduling_info(why)
        out.append(f"{'scheduling info:':<28}{info[0]}")
        out += [" " * 28 + line for line in info[1:]]
    return "\n".join(out) + "\n"


def xml_details(found: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    root = ElementTree.Element("detailed_job_info")
    info = ElementTree.SubElement(root, "djob_info")
    for job, why in found:
        element = ElementTree.SubElement(info, "element")
        for tag, key in (("JB_job_number", "JobID"), ("JB_job_name", "JobName"), ("JB_owner", "Owner"),
                         ("JB_group", "OwnerGroup"), ("JB_submission_time", "SubmissionTime"),
                         ("JB_priority", "Priority"), ("JB_state", "Status"), ("JB_minor_status", "MinorStatus"),
                         ("JB_queue", "Queue"), ("JB_ar", "AR")):
            _add(element, tag, job[key])
        messages = ElementTree.SubElement(element, "JB_scheduling_info")
        for line in scheduling_info(why):
            _add(messages, "message", line)
    return _document(root)


def qstat(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = build_parser().parse_args(argv)
        client = Client()
        if args.jobs:
            if args.users or args.full:
                raise UsageError("-j goes alone (with -xml at most), not with -u or -f")
            found, missing = details(client, job_ids(args.jobs))
            if found:
                sys.stdout.write(xml_details(found) if args.xml else text_details(found))
            if missing:
                print("Following jobs do not exist: " + ", ".join(map(str, missing)), file=sys.stderr)
                return 1
            return 0
        users = [u.strip() for value in args.users or [] for u in value.split(",") if u.strip()]
        rows = listed(client, users)
        sys.stdout.write(xml_list(rows) if args.xml else text_list(rows, args.full))
        return 0

    def guarded() -> int:
        try:
            return body()
        except UsageError as exc:
            print(f"qstat: {exc}", file=sys.stderr)
            return 2
        except ClientError as exc:
            print(f"qstat: {exc}", file=sys.stderr)
            return 1

    return run_program(guarded)


def main(argv: Sequence[str] | None = None) -> int:
    return qstat(argv)


if __name__ == "__main__":
    sys.exit(main())
