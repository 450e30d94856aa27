"""The pilot against a real `wms server` (tests/servers.py), shared by the
HTTP tests of this package.

One server for the package, so the suite stays fast; each test that uses
it starts from "no unfinished job" (leftovers are killed after the test),
because a pilot takes any waiting job its queue may run.

The copied configuration gives the local queue NumberOfProcessors: 2, so
a two-slot job exists to check the pilot's slot accounting.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers import CONFIG_DIR
from tests.servers import ServerHandle, Tokens, running_server

LOCAL = ("DIRAC.Local.ch", "localhost", "default")
UNFINISHED = ("Received", "Checking", "Waiting", "Matched", "Running", "Stalled")


def pilot_config(tmp: Path) -> Path:
    """config/ with a local queue that offers two processors."""
    config = tmp / "config-source"
    shutil.copytree(CONFIG_DIR, config)
    resources = config / "resources.yaml"
    data = yaml.safe_load(resources.read_text())
    data["Sites"][LOCAL[0]]["CEs"][LOCAL[1]]["Queues"][LOCAL[2]]["NumberOfProcessors"] = 2
    resources.write_text(yaml.safe_dump(data))
    return config


# -- fixtures ------------------------------------------------------------------


USERS = {
    "roland": ("roland", "lhcb_user", "lhcb", "user"),
    "alice": ("alice", "lhcb_user", "lhcb", "user"),
    "admin": ("admin", "lhcb_prod", "lhcb", "manager"),
    "pilot": ("pilot", "lhcb_pilot", "lhcb", "pilot"),
}


@pytest.fixture(scope="package")
def wms_server(tmp_path_factory) -> Iterator[ServerHandle]:
    tmp = tmp_path_factory.mktemp("pilot-server")
    with running_server(tmp, pilot_config(tmp), tokens=USERS) as handle:
        yield handle


@pytest.fixture(scope="package")
def tokens(wms_server) -> dict[str, str]:
    """Tokens of roland (user), admin (manager), pilot (pilot) and of any pilot id asked for."""
    return Tokens(wms_server)


@pytest.fixture
def server(wms_server, tokens) -> Iterator[ServerHandle]:
    """The package's server; unfinished jobs a test leaves are killed after it."""
    yield wms_server
    with wms_server.api(tokens["admin"]) as api:
        jobs = api.get("/jobs").raise_for_status().json()
        left = [j["JobID"] for j in jobs if j["Status"] in UNFINISHED]
        if left:
            api.post("/jobs/kill", json={"job_ids": left}).raise_for_status()


# -- helpers -------------------------------------------------------------------


def jdl(script: str, extra: str = "") -> str:
    """A job running ``/bin/sh -c script`` that the local queue (x86_64-el9) may run.

    The RFC #7 Requirements give the job a SubmitPool, which the local
    queue serves. ``script`` must not contain quotes.
    """
    return (f'[ Executable = "/bin/sh"; Arguments = "-c \'{script}\'"; CPUTime = 300; '
            f'Requirements = [ Platform = "x86_64-el9"; ]; {extra} ]')


_JDL_FILES = itertools.count()


def submit(server: ServerHandle, tokens: dict, tmp_path: Path, *texts: str) -> list[int]:
    """``wms submit`` as roland, one JDL file per text; the job IDs."""
    files = []
    for text in texts:
        path = tmp_path / f"job{next(_JDL_FILES)}.jdl"
        path.write_text(text)
        files.append(str(path))
    return [int(i) for i in server.ok("submit", *files, token=tokens["roland"]).split()]


def status(server: ServerHandle, tokens: dict, job_id: int) -> dict:
    """The job's row as roland sees it (GET /api/v1/jobs/{id})."""
    with server.api(tokens["roland"]) as api:
        return api.get(f"/jobs/{job_id}").raise_for_status().json()
