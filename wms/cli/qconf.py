"""`qconf`: Grid Engine's configuration command, as an HTTP client.

Implemented switches: -sc (show the complex table) and -Mc FILE (replace it
from a file, managers only). Exit status 0 on success, 1 on any refusal
(as Grid Engine's qconf), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from wms.cli.client import Client, ClientError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qconf", description="Grid Engine-style configuration of the WMS.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-sc", action="store_true", help="show the complex attributes")
    group.add_argument("-Mc", metavar="FILE", help="replace the complex attributes with those in FILE")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.sc:
            print(Client().get("/complexes")["text"])
            return 0
        try:
            text = Path(args.Mc).read_text()
        except OSError as exc:
            print(f"error: cannot read file {args.Mc!r}: {exc.strerror}", file=sys.stderr)
            return 1
        for line in Client().request("PUT", "/complexes", json={"text": text})["messages"]:
            print(line)
        return 0
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
