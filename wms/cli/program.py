"""What every command of the package shares: ``--version`` and the way it
ends (a reader that went away, an interrupt).

Each entry point runs its body through :func:`run_program`, so that
``wms jobs --json | head -1`` ends quietly like any Unix tool instead of
printing a BrokenPipeError traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from wms import __version__

EXIT_INTERRUPTED = 130      # 128 + SIGINT, as a shell reports it
EXIT_BROKEN_PIPE = 141      # 128 + SIGPIPE: what a C tool killed by the signal reports


class UsageError(Exception):
    """Bad command-line usage: exit status 2. Defined here, not in wms.cli.main, so
    that `python -m wms.cli.main` and the modules it loads share the one class."""


def version_text(prog: str) -> str:
    return f"{prog} (wms) {__version__}"


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: prints ``PROG (wms) VERSION`` and exits 0."""
    parser.add_argument("--version", action="version", version=version_text(parser.prog),
                        help="print the version and exit")


def run_program(body: Callable[[], int]) -> int:
    """``body()``'s exit status; a closed standard output or Ctrl-C ends it without a traceback."""
    try:
        status = body()
        sys.stdout.flush()      # inside the try: a pipe closed early shows up here, not at exit
        return status
    except BrokenPipeError:
        # Python would try to flush stdout again at exit and complain; point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
