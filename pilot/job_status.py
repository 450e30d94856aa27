"""For a payload: tell the server how far its job is, with its job token.

    python -m pilot.job_status "Reconstructing event 500"   # set the application status
    python -m pilot.job_status --show                       # print the job's status (JSON)

In a job, the pilot's package is at ``$WMS_PILOT_PATH`` (in its sandbox too):
``PYTHONPATH=$WMS_PILOT_PATH python3 -m pilot.job_status "..."``.

The pilot gives each payload, in its environment, ``WMS_URL`` (the
server), ``WMS_JOB_ID`` (its job) and ``WMS_JOB_TOKEN`` (the job token of
this hand-out, docs/security.md "Job tokens"): good for this job only,
and only until the attempt ends. Nothing else is needed, and nothing else
is sent: the pilot's own token is not in the payload's reach.

The job's minor status becomes ``Application: <text>`` (one line of at
most 256 characters). A payload may call it as often as it likes; the
server keeps a bounded number of lines in the job's history and the
latest as the minor status.

Exit status: 0 done; 1 refused by the server (the attempt is over, the
job is not running yet, a text it does not take), with its one-line
reason on stderr; 2 a usage error or a variable missing; 3 the server
could not be reached. A progress line is not worth failing a job for:
payloads should ignore a non-zero status, and this helper retries little.

Standard library only, like the rest of the pilot.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from pilot.client import ApiError, Client, ClientError

URL, JOB_ID, JOB_TOKEN = "WMS_URL", "WMS_JOB_ID", "WMS_JOB_TOKEN"
# A payload should not wait long for its progress line: a short timeout, two
# retries, a minute at most for a busy server.
TIMEOUT, RETRIES, BUSY_PATIENCE = 10.0, 2, 60.0


class Missing(Exception):
    """A variable the pilot sets is not in the environment."""


def job_client(environ: Mapping[str, str] = os.environ) -> tuple[Client, int]:
    """A client carrying the job token, and the job's id, from the environment."""
    missing = [name for name in (URL, JOB_ID, JOB_TOKEN) if not environ.get(name, "").strip()]
    if missing:
        raise Missing(f"{', '.join(missing)} not set: run inside a job started by wms-pilot")
    text = environ[JOB_ID].strip()
    if not text.isdigit():
        raise Missing(f"{JOB_ID} is not a job id: {text!r}")
    client = Client(environ[URL].strip(), environ[JOB_TOKEN].strip(), timeout=TIMEOUT, retries=RETRIES,
                    busy_patience=BUSY_PATIENCE)
    return client, int(text)


def set_application_status(text: str, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Set this job's application status to ``text``; the server's answer
    (JobID, Status, MinorStatus, Recorded). Raises ClientError (ApiError: refused)."""
    client, job_id = job_client(environ)
    return client.call("POST", f"/jobs/{job_id}/application-status", {"application_status": text})


def job_status(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """This job's status as the server has it (GET /jobs/{id})."""
    client, job_id = job_client(environ)
    return client.call("GET", f"/jobs/{job_id}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pilot.job_status",
        description="Set the application status of the job this payload runs in (WMS_URL, WMS_JOB_ID, "
                    "WMS_JOB_TOKEN from the environment), or show its status.")
    parser.add_argument("text", nargs="?", help="one line, e.g. 'Reconstructing event 500'")
    parser.add_argument("--show", action="store_true", help="print the job's status as JSON instead")
    return parser


def main(argv: list[str] | None = None, environ: Mapping[str, str] = os.environ) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.show == (args.text is not None):
        parser.print_usage(sys.stderr)
        print("give the text of the application status, or --show", file=sys.stderr)
        return 2
    try:
        if args.show:
            print(json.dumps(job_status(environ), indent=2))
        else:
            set_application_status(args.text, environ)
    except Missing as exc:
        print(f"job_status: {exc}", file=sys.stderr)
        return 2
    except ApiError as exc:
        print(f"job_status: {exc.detail}", file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"job_status: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
