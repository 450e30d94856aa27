"""`qrsub`, `qrstat`, `qrdel` and `qralter`: Grid Engine's advance
reservation commands (specs/003, qrsub(1), qrstat(1), qrdel(1)) as HTTP
clients.

Exit statuses: 0 success; 1 refused or failed (one line on stderr); 2 bad
usage; qrsub 25 when max_advance_reservations is reached. date_time
arguments are read in this machine's local time zone.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence
from xml.etree import ElementTree

from wms.cli.client import Client, ClientError, read_text_file
from wms.cli.main import UsageError, parse_requests
from wms.cli.program import add_version, run_program
from wms.core.errors import InvalidInput
from wms.core.reservations.timespec import parse_date_time

EXIT_MAX_RESERVATIONS = 25
HTTP_TOO_MANY = 429
HTTP_NOT_FOUND = 404


class Parser(argparse.ArgumentParser):
    """argparse with Grid Engine's exit status 2 and one-line errors."""

    def error(self, message: str) -> None:  # pragma: no cover - exercised through main()
        raise UsageError(message)


def _parser(prog: str, description: str) -> Parser:
    parser = Parser(prog=prog, description=description, allow_abbrev=False)
    parser.add_argument("-help", action="help", help="print this help")
    add_version(parser)
    return parser


def local_now() -> datetime:
    return datetime.now().astimezone()


def date_time(text: str) -> str:
    """A date_time argument as ISO 8601 with this machine's zone."""
    try:
        return parse_date_time(text, local_now()).isoformat()
    except InvalidInput as exc:
        raise UsageError(str(exc)) from None


def yes_no(option: str, text: str | None) -> bool:
    value = (text or "yes").strip().lower()
    if value in ("y", "yes"):
        return True
    if value in ("n", "no"):
        return False
    raise UsageError(f"{option}: expected y[es] or n[o], got {text!r}")


def comma_list(values: Sequence[str] | None) -> list[str]:
    return [item.strip() for value in values or () for item in value.split(",") if item.strip()]


def run(prog: str, body: Callable[[], int]) -> int:
    def guarded() -> int:
        try:
            return body()
        except UsageError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        except ClientError as exc:
            # "denied: ..." and "error: ..." are the specification's own messages, printed as they are.
            print(str(exc) if str(exc).startswith(("denied:", "error:")) else f"{prog}: {exc}", file=sys.stderr)
            return EXIT_MAX_RESERVATIONS if exc.status == HTTP_TOO_MANY else 1

    return run_program(guarded)


# ---------------------------------------------------------------- qrsub
def qrsub_parser() -> Parser:
    p = _parser("qrsub", "Submit an advance reservation.")
    p.add_argument("-a", metavar="date_time", help="start time [[CC]YY]MMDDhhmm[.SS] (default: now)")
    p.add_argument("-e", metavar="date_time", help="end time [[CC]YY]MMDDhhmm[.SS]")
    p.add_argument("-d", metavar="time", help="duration in TIME format (h:m:s or seconds)")
    p.add_argument("-w", choices=["e", "v"], default="e", help="e: reject if it cannot be granted; v: verify only")
    p.add_argument("-N", metavar="name", default="", help="reservation name")
    p.add_argument("-A", metavar="account_string", default="sge", help="account in the accounting record")
    p.add_argument("-l", metavar="resource_list", action="append", default=[], help="resources to reserve")
    p.add_argument("-u", metavar="wc_user", action="append", help="access list: users and @user sets")
    p.add_argument("-q", metavar="wc_queue_list", action="append", help="reserve in these queues")
    p.add_argument("-now", metavar="y|n", nargs="?", const="yes", help="only queues of qtype INTERACTIVE")
    p.add_argument("-pe", nargs=2, metavar=("pe_name", "slot_range"), help="parallel environment and slots")
    p.add_argument("-alloc", nargs=2, metavar=("allocation_rule", "slot_range"),
                   help="reserve a slot range spread by the rule ($fill_up, $round_robin, $pe_slots)")
    p.add_argument("-masterq", metavar="wc_queue_list", action="append",
                   help="with -pe: the queues that may hold the master task of the parallel jobs")
    p.add_argument("-ckpt", metavar="ckpt_name", help="only queues offering this checkpoint environment")
    p.add_argument("-m", metavar="b|e|a|n", default="n", help="mail at the beginning, end, on error; n: none")
    p.add_argument("-M", metavar="user[@host],...", action="append", help="mail these addresses")
    p.add_argument("-he", metavar="y|n", default="no", help="hard error handling (no jobs while in error)")
    return p


GLOBAL_AR_REQUEST = "/etc/wms/sge_ar_request"


def default_requests() -> list[str]:
    """qrsub(1)'s default request files: the cluster's (``$WMS_AR_REQUEST``, else
    /etc/wms/sge_ar_request), then the user's ``$HOME/.sge_ar_request``.

    Their switches come before the command line's, so the command line wins
    for single switches (-N, -a, -l name=...) and adds to lists (-u, -q, -M).
    Lines starting with # are comments."""
    paths = [Path(os.environ.get("WMS_AR_REQUEST", GLOBAL_AR_REQUEST)),
             Path(os.environ.get("HOME", str(Path.home()))) / ".sge_ar_request"]
    out: list[str] = []
    for path in paths:
        try:
            text = read_text_file(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot read default request file {path}: {exc.strerror}") from None
        except InvalidInput as exc:
            raise UsageError(f"default request file: {exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    out.extend(shlex.split(line))
                except ValueError as exc:
                    raise UsageError(f"{path}, line {number}: {exc}") from None
    return out


def qrsub(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        given = list(sys.argv[1:] if argv is None else argv)
        if "-help" in given:
            qrsub_parser().parse_args(["-help"])
        args = qrsub_parser().parse_args(default_requests() + given)
        if args.pe and args.alloc:
            raise UsageError("-pe and -alloc exclude each other")
        resources: dict[str, Any] = {}
        for text in args.l:
            resources.update(parse_requests(text))
        request: dict[str, Any] = {
            "start": date_time(args.a) if args.a else None, "end": date_time(args.e) if args.e else None,
            "duration": args.d, "name": args.N, "account": args.A, "resources": resources,
            "users": comma_list(args.u), "queues": comma_list(args.q), "master_queues": comma_list(args.masterq),
            "interactive": yes_no("-now", args.now) if args.now is not None else False,
            "ckpt": args.ckpt, "mail_options": args.m, "mail_list": comma_list(args.M),
            "hard_error": yes_no("-he", args.he), "verify": args.w == "v",
        }
        if args.pe:
            request.update(pe=args.pe[0], pe_slots=args.pe[1])
        if args.alloc:
            request.update(allocation=args.alloc[0], pe_slots=args.alloc[1])
        result = Client().post("/reservations", request)
        print(result["message"])
        if request["verify"]:
            return 0 if result["verified"] else 1
        return 0

    return run("qrsub", body)


# ---------------------------------------------------------------- qrstat
OVERVIEW = "{:>7} {:<10} {:<12} {:<5} {:<19} {:<19} {}"
HEADER = "AR-ID   name       user         state start at            end at              duration"
DETAIL_WIDTH = 28
RULE = 87   # the width of the spec's example


def _local(iso: str, style: str) -> str:
    moment = datetime.fromisoformat(iso).astimezone()
    return moment.strftime("%m/%d/%Y %H:%M:%S" if style == "short" else "%a %b %d %H:%M:%S %Y")


def overview_lines(rows: list[dict[str, Any]], explain: bool) -> list[str]:
    """qrstat without -ar: the spec's table; with -explain one line per error reason under its reservation."""
    lines = [HEADER, "-" * RULE]
    for ar in rows:
        lines.append(OVERVIEW.format(ar["ar_id"], ar["name"], ar["owner"], ar["state"], _local(ar["start"], "short"),
                                     _local(ar["end"], "short"), ar["duration"]).rstrip())
        if explain and ar["message"]:
            lines.extend(f"       {reason}" for reason in ar["message"].split("; "))
    return lines


def detail_lines(ar: dict[str, Any], explain: bool) -> list[str]:
    # The spec's example first (ar_number ... ar_name), then the rest of the request.
    fields = [
        ("ar_number", ar["ar_id"]), ("submission_time", _local(ar["submission_time"], "long")),
        ("owner", ar["owner"]), ("acl_list", ",".join(ar["acl"])), ("start", _local(ar["start"], "long")),
        ("end", _local(ar["end"], "long")), ("duration", ar["duration"]), ("slots", ar["slots"]),
        ("complex_values", ar["complex_values"]), ("ar_name", ar["name"]), ("state", ar["state"]),
        ("account", ar["account"]),
        ("resource_list", ",".join(f"{k}={v}" for k, v in ar["resources"].items()) or "NONE"),
        ("queue_list", ",".join(ar["queues"]) or "NONE"),
        ("master hard queue_list", ",".join(ar.get("masterq") or []) or "NONE"),
        ("granted_queues", ",".join(f"{g['queue']}@{g['host']}={g['slots']}" if g["host"]
                                    else f"{g['queue']}={g['slots']}" for g in ar["granted"])),
        ("pe", f"{ar['pe']} {ar['pe_range'][0]}-{ar['pe_range'][1]}" if ar["pe"] else "NONE"),
        ("checkpoint_name", ar["ckpt"] or "NONE"), ("mail_options", ar["mail_options"]),
        ("mail_list", ar["mail_list"] or "NONE"), ("error_handling", "hard" if ar["hard_error"] else "soft"),
    ]
    if explain or ar["message"]:
        fields.append(("message", ar["message"]))
    return ["=" * 62] + [f"{name + ':':<{DETAIL_WIDTH}}{value}" for name, value in fields]


SCHEMA = Path(__file__).with_name("schemas") / "qrstat.xsd"


def _xml_time(iso: str) -> str:
    """Grid Engine's XML times: local, ``2006-12-18T10:00:00``."""
    return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%dT%H:%M:%S")


def _xml_duration(text: str) -> str:
    """``24:0:10`` -> ``24:00:10`` (qrstat -xml pads minutes and seconds)."""
    hours, minutes, seconds = (int(part) for part in text.split(":"))
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def to_xml(rows: list[dict[str, Any]], detail: bool, explain: bool = False, unknown: Sequence[str] = ()) -> str:
    """qrstat -xml: Grid Engine's elements in its order (wms/cli/schemas/qrstat.xsd describes them)."""
    root = ElementTree.Element("qrstat", {
        "xmlns:xsd": "http://www.w3.org/2001/XMLSchema",
        "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
        "xsi:noNamespaceSchemaLocation": SCHEMA.as_uri(),
    })

    def text(parent: ElementTree.Element, name: str, value: Any) -> None:
        ElementTree.SubElement(parent, name).text = "" if value is None else str(value)

    for ar in rows:
        node = ElementTree.SubElement(root, "ar_summary")
        text(node, "id", ar["ar_id"])
        text(node, "name", ar["name"])
        text(node, "owner", ar["owner"])
        text(node, "state", ar["state"])
        text(node, "start_time", _xml_time(ar["start"]))
        text(node, "end_time", _xml_time(ar["end"]))
        text(node, "duration", _xml_duration(ar["duration"]))
        if explain or detail:
            for reason in filter(None, (ar["message"] or "").split("; ")):
                text(node, "message", reason)
        if not detail:
            continue
        text(node, "submission_time", _xml_time(ar["submission_time"]))
        text(node, "group", ar.get("group", ""))
        text(node, "account", ar["account"])
        if ar["resources"]:
            resources = ElementTree.SubElement(node, "resource_list")
            for name, value in ar["resources"].items():
                ElementTree.SubElement(resources, "resource", {"name": name, "type": str(value)})
        if ar["hard_error"]:
            text(node, "error_handling", "true")
        if ar["granted"]:
            granted = ElementTree.SubElement(node, "granted_slots_list")
            for g in ar["granted"]:
                instance = f"{g['queue']}@{g['host']}" if g["host"] else g["queue"]
                ElementTree.SubElement(granted, "granted_slots",
                                       {"queue_instance": instance, "slots": str(g["slots"])})
        if ar["pe"]:
            pe = ElementTree.SubElement(node, "granted_parallel_environment")
            text(pe, "parallel_environment", ar["pe"])
            text(pe, "slots", f"{ar['pe_range'][0]}-{ar['pe_range'][1]}")
        if ar["ckpt"]:
            text(node, "checkpoint_name", ar["ckpt"])
        if ar["mail_options"] and ar["mail_options"] != "n":
            text(node, "mail_options", ar["mail_options"])
        if ar["mail_list"]:
            mails = ElementTree.SubElement(node, "mail_list")
            for address in ar["mail_list"].split(","):
                user, _, host = address.partition("@")
                ElementTree.SubElement(mails, "mail", {"user": user, "host": host or "NONE"})
        if ar["acl"]:
            acl = ElementTree.SubElement(node, "acl_list")
            for user in ar["acl"]:
                ElementTree.SubElement(acl, "acl", {"user": user})
    for selector in unknown:
        text(ElementTree.SubElement(root, "ar_unknown"), "id", selector)
    ElementTree.indent(root, space="   ")
    return "<?xml version='1.0'?>\n" + ElementTree.tostring(root, encoding="unicode")


def qrstat_parser() -> Parser:
    p = _parser("qrstat", "Show the status of advance reservations.")
    p.add_argument("-ar", metavar="ar_list", action="append", help="show these reservations (ids, names, patterns)")
    p.add_argument("-u", metavar="user_list", action="append", help="only reservations of these users ($user, *)")
    p.add_argument("-explain", action="store_true", help="show why a reservation is in error state")
    p.add_argument("-xml", action="store_true", help="print XML")
    return p


def qrstat(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = qrstat_parser().parse_args(argv)
        selectors = comma_list(args.ar)
        users = comma_list(args.u)
        if args.xml and selectors:
            # Like Grid Engine: the ids that do not exist are listed as ar_unknown (exit 1).
            rows, unknown = [], []
            for selector in selectors:
                try:
                    found = Client().get("/reservations", ar=[selector], user=users or None)
                except ClientError as exc:
                    if exc.status != HTTP_NOT_FOUND:
                        raise
                    unknown.append(selector)
                    continue
                rows.extend(r for r in found if r["ar_id"] not in {seen["ar_id"] for seen in rows})
            print(to_xml(rows, True, args.explain, unknown))
            return 1 if unknown else 0
        if selectors:
            rows = Client().get("/reservations", ar=selectors, user=users or None)
        else:
            rows = Client().every("/reservations", user=users or None)
        if args.xml:
            print(to_xml(rows, False, args.explain))
            return 0
        if selectors:
            for ar in rows:
                print("\n".join(detail_lines(ar, args.explain)))
            return 0
        if rows:
            print("\n".join(overview_lines(rows, args.explain)))
        return 0

    return run("qrstat", body)


# ---------------------------------------------------------------- qrdel
def qrdel_parser() -> Parser:
    p = _parser("qrdel", "Delete advance reservations (their jobs first).")
    p.add_argument("-f", action="store_true",
                   help="force: release the resources at once, without waiting for the pilots to stop the jobs")
    p.add_argument("-u", metavar="wc_user_list", action="append",
                   help="only reservations of these users ($user, wildcards); alone: all of theirs")
    p.add_argument("ar_list", nargs="*", help="AR ids or names (wildcards), separated by commas or blanks")
    return p


def qrdel(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = qrdel_parser().parse_args(argv)
        if not args.ar_list and not args.u:
            raise UsageError("give advance reservation ids or names (wc_ar_list), or -u wc_user_list")
        result = Client().post("/reservations/delete", {"selectors": comma_list(args.ar_list), "force": args.f,
                                                         "users": comma_list(args.u) or None})
        for line in result["messages"]:
            print(line)
        return 0

    return run("qrdel", body)


# ---------------------------------------------------------------- qralter
def qralter_parser() -> Parser:
    p = _parser("qralter", "Change an advance reservation.")
    p.add_argument("-N", metavar="name", help="new name")
    p.add_argument("-u", metavar="wc_user", action="append", help="new access list: users and @user sets")
    p.add_argument("-m", metavar="b|e|a|n", help="new mail options")
    p.add_argument("-M", metavar="user[@host],...", action="append", help="new mail list")
    p.add_argument("-e", metavar="date_time", help="new end time")
    p.add_argument("-d", metavar="time", help="new duration")
    p.add_argument("ar_id", type=int, help="the reservation to change")
    return p


def qralter(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = qralter_parser().parse_args(argv)
        change = {"name": args.N, "users": comma_list(args.u) if args.u else None, "mail_options": args.m,
                  "mail_list": comma_list(args.M) if args.M else None,
                  "end": date_time(args.e) if args.e else None, "duration": args.d}
        change = {k: v for k, v in change.items() if v is not None}
        if not change:
            raise UsageError("nothing to change: give -N, -u, -m, -M, -e or -d")
        print(Client().request("PATCH", f"/reservations/{args.ar_id}", json=change)["message"])
        return 0

    return run("qralter", body)
