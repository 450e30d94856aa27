"""`qquota`: the usage of resource quotas (specs/001 "qquota"; qquota(1)).

    qquota [-h hosts] [-l resources] [-u users] [-pe pes] [-P projects] [-q queues] [-xml]

One line per rule instance in use (``slots=2/20``) and per static
non-consumable limit (``arch=lx24-amd64``), with the rule's effective
filter. The users default to the caller. Default options come from the
cluster-wide file ``sge_qquota`` in the configuration directory
(``WMS_CONFIG``, default ``./config``) and then ``~/.sge_qquota`` (which
wins); the command line wins over both. ``-xml`` prints the document of
the specification's schema (qquota.xsd next to this module).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence
from xml.etree import ElementTree

from wms.cli.client import Client, ClientError, read_text_file
from wms.cli.program import add_version, run_program
from wms.core.errors import InvalidInput

SCHEMA = Path(__file__).with_name("qquota.xsd")
FILTER_ELEMENTS = ("user", "xuser", "project", "xproject", "pe", "xpe", "queue", "xqueue", "host", "xhost")
HEADER = ("resource quota rule", "limit", "filter")
NOTHING_IN_USE = ("qquota: no rule of an enabled set counts anything of yours (or of the -u users) now; a rule "
                  "is listed once a matched or running job uses what it limits (qconf -srqs shows the limits)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qquota", description="Show the usage of resource quotas.",
                                     allow_abbrev=False, add_help=False)
    parser.add_argument("-help", action="help", help="print this help")
    add_version(parser)
    parser.add_argument("-h", dest="hosts", metavar="host_list", help="display only selected hosts")
    parser.add_argument("-l", dest="resources", metavar="resource_attributes", help="display only these resources")
    parser.add_argument("-u", dest="users", metavar="user_list", help="display only selected users (default: you)")
    parser.add_argument("-pe", dest="pes", metavar="pe_list", help="display only selected parallel environments")
    parser.add_argument("-P", dest="projects", metavar="project_list", help="display only selected projects")
    parser.add_argument("-q", dest="queues", metavar="wc_queue_list", help="display only selected queues")
    parser.add_argument("-xml", action="store_true", help="display the information in XML")
    return parser


def default_files() -> list[Path]:
    """The cluster-wide file, then the user's (later files win)."""
    config = Path(os.environ.get("WMS_CONFIG") or "config")
    home = Path(os.environ.get("HOME", str(Path.home())))
    return [config / "sge_qquota", home / ".sge_qquota"]


def default_arguments(files: Sequence[Path]) -> list[str]:
    out: list[str] = []
    for path in files:
        try:
            text = read_text_file(path)
        except OSError:
            continue
        except InvalidInput as exc:
            raise SystemExit(f"qquota: {exc}") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out += shlex.split(line)
    return out


def _split(value: str | None) -> list[str]:
    return [item for item in (value or "").split(",") if item]


def text_report(rows: list[dict[str, Any]]) -> str:
    widths = [max([len(HEADER[0])] + [len(r["rule"]) for r in rows]),
              max([len(HEADER[1])] + [len(r["limit"]) for r in rows])]
    lines = [f"{HEADER[0]:<{widths[0]}} {HEADER[1]:<{widths[1]}} {HEADER[2]}".rstrip(), "-" * 80]
    lines += [f"{r['rule']:<{widths[0]}} {r['limit']:<{widths[1]}} {r['filter']}".rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def xml_report(rows: list[dict[str, Any]]) -> str:
    """One qquota_rule per rule instance, its filters and its limits, in the schema's order."""
    grouped: list[tuple[tuple[str, str], dict[str, list[str]], list[dict[str, Any]]]] = []
    for row in rows:
        key = (row["rule"], row["filter"])
        if not grouped or grouped[-1][0] != key:
            grouped.append((key, row["filters"], []))
        grouped[-1][2].append(row)
    root = ElementTree.Element("qquota_result", {"xmlns:xsd": "http://www.w3.org/2001/XMLSchema"})
    for (rule, _), filters, limits in grouped:
        node = ElementTree.SubElement(root, "qquota_rule", {"name": rule})
        for element in FILTER_ELEMENTS:
            for value in filters.get(element, []):
                ElementTree.SubElement(node, element).text = value
        for row in limits:
            limit = {"resource": row["resource"], "limit": row["limit_value"]}
            if row["used"] is not None:
                limit["value"] = row["used"]
            ElementTree.SubElement(node, "limit", limit)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(default_arguments(default_files()) + given)
    params = {"users": _split(args.users), "projects": _split(args.projects), "pes": _split(args.pes),
              "queues": _split(args.queues), "hosts": _split(args.hosts), "resources": _split(args.resources)}
    try:
        rows = Client().get("/quotas", **{k: v for k, v in params.items() if v})
    except ClientError as exc:
        # The server's refusals are Grid Engine's own messages; anything else says who failed.
        print(exc if exc.status in (400, 404) else f"qquota: {exc}", file=sys.stderr)
        return 1
    if not rows and not args.xml:
        # As Grid Engine's qquota: a rule is listed only once something counts
        # against it. Say so, on stderr (the table on stdout stays the spec's),
        # so that an empty table after `qconf -mattr ... enabled true` is not
        # taken for a set that did not take.
        print(NOTHING_IN_USE, file=sys.stderr)
    return run_program(lambda: print(xml_report(rows) if args.xml else text_report(rows), end="") or 0)


if __name__ == "__main__":
    sys.exit(main())
