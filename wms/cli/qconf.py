"""`qconf`: Grid Engine's configuration command, as an HTTP client.

Implemented switches:

* -sc (show the complex table), -Mc FILE (replace it, managers only);
* -sql (the queue list), -sq [wc_queue_list] (each queue's configuration, in
  queue_conf(5)'s ``name value`` layout; the queues are resources.yaml's,
  read only here);
* resource quota sets (specs/001, sge_resource_quota(5)): -arqs [name]
  and -mrqs [name] (in $EDITOR), -Arqs FILE, -Mrqs FILE [name],
  -srqs [name_list], -srqsl, -drqs [name_list];
* -aattr/-dattr/-mattr/-rattr resource_quota ATTR VALUE set[/rule] and
  their file forms -Aattr/-Dattr/-Mattr/-Rattr resource_quota FILE
  set[/rule] (each line of FILE is ``attribute value``).

Messages print on stdout, refusals one line on stderr. Exit status 0 on
success, 1 on any refusal (as Grid Engine's qconf), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from fnmatch import fnmatchcase
from typing import Any, Sequence

from wms.cli.client import Client, ClientError, read_text_file
from wms.cli.program import add_version, run_program
from wms.core.errors import InvalidInput

ATTRIBUTE_SWITCHES = ("aattr", "dattr", "mattr", "rattr")
FILE_ATTRIBUTE_SWITCHES = ("Aattr", "Dattr", "Mattr", "Rattr")
OBJECT_NAMES = ("resource_quota", "rqs")
QUEUE_CONF_WIDTH = 19      # queue_conf(5) as qconf -sq prints it: names padded to one column


class Refused(Exception):
    """One line for stderr, exit 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qconf", description="Grid Engine-style configuration of the WMS.",
                                     allow_abbrev=False)
    parser.add_argument("-help", action="help", help="print this help")
    add_version(parser)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-sc", action="store_true", help="show the complex attributes")
    group.add_argument("-sql", action="store_true", help="show the queue list (Site/CE/Queue)")
    group.add_argument("-sq", nargs="*", metavar="wc_queue_list",
                       help="show the configuration of these queues (default: all)")
    group.add_argument("-Mc", metavar="FILE", help="replace the complex attributes with those in FILE")
    group.add_argument("-arqs", nargs="?", const="", metavar="name", help="add resource quota set(s) in $EDITOR")
    group.add_argument("-Arqs", metavar="fname", help="add resource quota set(s) from file")
    group.add_argument("-mrqs", nargs="?", const="", metavar="name", help="modify resource quota set(s) in $EDITOR")
    group.add_argument("-Mrqs", nargs="+", metavar=("fname", "name"), help="modify resource quota set(s) from file")
    group.add_argument("-srqs", nargs="*", metavar="name_list", help="show resource quota set(s)")
    group.add_argument("-srqsl", action="store_true", help="show resource quota set list")
    group.add_argument("-drqs", nargs="*", metavar="name_list", help="delete resource quota set(s)")
    for switch, what in zip(ATTRIBUTE_SWITCHES, ("add to", "delete from", "modify", "replace")):
        group.add_argument(f"-{switch}", nargs=4, metavar=("obj_nm", "attr_nm", "val", "obj_id_lst"),
                           help=f"{what} an attribute of an object")
    for switch, what in zip(FILE_ATTRIBUTE_SWITCHES, ("add to", "delete from", "modify", "replace")):
        group.add_argument(f"-{switch}", nargs=3, metavar=("obj_nm", "fname", "obj_id_lst"),
                           help=f"{what} attributes of an object, from a file")
    return parser


def _names(values: Sequence[str] | None) -> str:
    return ",".join(n for value in values or () for n in value.split(",") if n)


def _read(path: str) -> str:
    try:
        return read_text_file(path)
    except OSError as exc:
        raise Refused(f"qconf: cannot read file {path!r}: {exc.strerror}") from None
    except InvalidInput as exc:
        raise Refused(f"qconf: {exc}") from None


def edit(text: str) -> str:
    """Open ``text`` in $EDITOR (vi by default) and return what was saved."""
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=".rqs", delete=False) as handle:
        handle.write(text)
        path = handle.name
    try:
        if subprocess.call([*shlex.split(editor), path]) != 0:
            raise Refused(f"qconf: the editor {editor!r} failed")
        return _read(path)
    finally:
        os.unlink(path)


def queue_lines(row: dict[str, Any]) -> list[str]:
    """One queue in queue_conf(5)'s layout: qname, slots and complex_values, then its DIRAC parameters."""
    params = {k: v for k, v in row.get("Parameters", {}).items() if k not in ("Site", "CE", "Queue")}
    values = params.pop("complex_values", None) or {}
    fields = [("qname", row["Name"]), ("slots", (row.get("Slots") or {}).get("total", "NONE")),
              ("complex_values", ",".join(f"{k}={v}" for k, v in values.items()) or "NONE")]
    fields += [(k, ",".join(map(str, v)) if isinstance(v, list) else v) for k, v in params.items()]
    return [f"{name:<{QUEUE_CONF_WIDTH}}{value}" for name, value in fields]


def queues(args: argparse.Namespace, client: Client) -> None:
    rows = [row for row in client.get("/queues") if row["Kind"] == "queue"]
    if args.sql:
        _print([row["Name"] for row in rows])
        return
    patterns = [n for value in args.sq for n in value.split(",") if n]
    chosen = [row for row in rows if not patterns or any(fnmatchcase(row["Name"], p) for p in patterns)]
    for pattern in patterns:
        if not any(fnmatchcase(row["Name"], pattern) for row in rows):
            raise Refused(f'qconf: no queue matches "{pattern}" (qconf -sql lists them)')
    for index, row in enumerate(chosen):
        if index:
            print()
        _print(queue_lines(row))


def _print(lines: Sequence[str]) -> None:
    for line in lines:
        print(line)


def rqs(args: argparse.Namespace, client: Client) -> None:
    if args.arqs is not None:
        name = args.arqs or None
        if name is not None and name in client.get("/rqs/names")["names"]:
            raise Refused(f'resource quota set "{name}" already exists')
        text = edit(client.get("/rqs/template", name=name)["text"])
        _print(client.post("/rqs", {"text": text, "source": "edited resource quota set"})["messages"])
    elif args.Arqs is not None:
        _print(client.post("/rqs", {"text": _read(args.Arqs), "source": args.Arqs})["messages"])
    elif args.mrqs is not None:
        name = args.mrqs or None
        text = edit(client.get("/rqs", names=name)["text"])
        _print(client.request("PUT", "/rqs", json={"text": text, "name": name,
                                                   "source": "edited resource quota set"})["messages"])
    elif args.Mrqs is not None:
        if len(args.Mrqs) > 2:
            raise Refused("qconf: -Mrqs takes a file and at most one resource quota set name")
        name = args.Mrqs[1] if len(args.Mrqs) == 2 else None
        body = {"text": _read(args.Mrqs[0]), "name": name, "source": args.Mrqs[0]}
        _print(client.request("PUT", "/rqs", json=body)["messages"])
    elif args.srqs is not None:
        print(client.get("/rqs", names=_names(args.srqs) or None)["text"], end="")
    elif args.srqsl:
        names = client.get("/rqs/names")["names"]
        if not names:
            raise Refused("no resource quota set list defined")
        _print(names)
    elif args.drqs is not None:
        _print(client.request("DELETE", "/rqs", params={"names": _names(args.drqs)})["messages"])


def attributes(args: argparse.Namespace, client: Client) -> bool:
    for switch in ATTRIBUTE_SWITCHES + FILE_ATTRIBUTE_SWITCHES:
        values = getattr(args, switch)
        if values is None:
            continue
        obj = values[0]
        if obj not in OBJECT_NAMES:
            raise Refused(f'qconf: object "{obj}" is not supported here (only resource_quota)')
        if switch in ATTRIBUTE_SWITCHES:
            changes = [(values[1], values[2])]
        else:
            changes = []
            for line in _read(values[1]).splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    attribute, _, value = line.strip().partition(" ")
                    changes.append((attribute, value.strip()))
            if not changes:
                raise Refused(f"qconf: no attribute in file {values[1]!r}")
        for target in values[-1].split(","):
            for attribute, value in changes:
                body = {"switch": switch, "attribute": attribute, "value": value, "target": target}
                _print(client.post("/rqs/attributes", body)["messages"])
        return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_program(lambda: run(args))


def run(args: argparse.Namespace) -> int:
    try:
        if args.sc:
            print(Client().get("/complexes")["text"])
            return 0
        if args.Mc is not None:
            text = _read(args.Mc)
            for line in Client().request("PUT", "/complexes", json={"text": text})["messages"]:
                print(line)
            return 0
        client = Client()
        if args.sql or args.sq is not None:
            queues(args, client)
        elif not attributes(args, client):
            rqs(args, client)
        return 0
    except Refused as exc:
        print(exc, file=sys.stderr)
        return 1
    except ClientError as exc:
        # The server's refusals are Grid Engine's own messages; anything else says who failed.
        print(exc if exc.status in (400, 404, 409) else f"qconf: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
