"""The CLI reads every paged list to its end, against a real `wms server`
whose pages hold 2 rows: `wms task-queues`, `wms pools`, `wms pilots`,
`wms accounting` (jobs and reservations) and `qrstat` print every row, as a
table and as JSON, however many pages the server sends them in."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.helpers import patience
from tests.servers import ServerHandle, edited_config, running_server

BIN = Path(sys.executable).parent

USERS = {"roland": ("roland", "lhcb_user", "lhcb", "user"), "admin": ("admin", "lhcb_prod", "lhcb", "manager")}
ROWS = 5    # of each list: three pages of two


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerHandle]:
    tmp = tmp_path_factory.mktemp("paged-lists")
    config = edited_config(tmp / "config-source", {"page_size: 1000": "page_size: 2"})
    with running_server(tmp / "server", config_dir=config, tokens=USERS) as handle:
        roland, admin = handle.issued["roland"], handle.issued["admin"]
        with handle.api(roland) as api:
            ids = []
            for memory in range(1, ROWS + 1):              # a pool and a task queue each
                text = f'[ Executable = "/bin/true"; Requirements = [ Memory = {memory}; ]; ]'
                response = api.post("/jobs", json={"jdls": [{"source": "j.jdl", "text": text}]})
                assert response.status_code == 201, response.text
                ids += response.json()["job_ids"]
            assert api.post("/jobs/kill", json={"job_ids": ids}).status_code == 200
        start = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0)
        with handle.api(admin) as api:
            for n in range(ROWS):
                response = api.post("/reservations", json={
                    "start": (start + timedelta(days=n)).isoformat(), "duration": "1:00:00", "name": f"r{n}"})
                assert response.status_code == 201, response.text
        for n in range(ROWS):                              # pilots started by hand that declared themselves
            with handle.api(handle.pilot_token(f"hand-{n}")) as api:
                assert api.post("/pilots/token/renew", json={"pilot_id": f"hand-{n}", "slots": 1}).status_code == 200
        yield handle


@pytest.mark.parametrize(("command", "user", "key"), [
    (["task-queues"], "roland", "TaskQueue"),
    (["pools", "--details"], "roland", "SubmitPool"),
    (["pilots"], "admin", "PilotID"),
    (["accounting"], "roland", "JobID"),
    (["accounting", "--reservations"], "roland", "ar_id"),
])
def test_a_list_command_prints_every_page_as_json_and_as_a_table(server, command, user, key):
    token = server.issued[user]
    rows = server.json(*command, "--json", token=token)
    assert len(rows) == ROWS and len({row[key] for row in rows}) == ROWS
    table = server.ok(*command, token=token).splitlines()
    assert table[0].split()[0] == key and len(table) == 2 + ROWS


def test_wms_pools_json_is_every_pool_id_across_the_pages(server):
    ids = server.json("pools", "--json", token=server.issued["roland"])
    assert len(ids) == ROWS and all(isinstance(pool, str) for pool in ids) and ids == sorted(ids)


def test_wms_accounting_lists_the_newest_job_first_across_the_pages(server):
    ids = [row["JobID"] for row in server.json("accounting", "--json", token=server.issued["roland"])]
    assert ids == sorted(ids, reverse=True)


def test_qrstat_shows_every_reservation_across_the_pages(server):
    env = {**server.env, "WMS_TOKEN": server.issued["roland"]}
    for xml in ([], ["-xml"]):
        done = subprocess.run([str(BIN / "qrstat"), *xml], env=env, capture_output=True, text=True,
                              timeout=patience(60))
        assert done.returncode == 0, done.stderr
        if xml:
            assert len(ElementTree.fromstring(done.stdout).findall(".//ar_summary")) == ROWS, done.stdout
        else:
            assert [line.split()[1] for line in done.stdout.splitlines()[2:]] == [f"r{n}" for n in range(ROWS)]
