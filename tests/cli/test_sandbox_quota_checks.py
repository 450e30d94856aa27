"""The sandbox quotas seen from the client, against a real `wms server` whose
users may hold 2,000 bytes each (sandboxes.user_bytes): GET /sandboxes/limits
reports the quotas and what the caller holds; an upload that would pass the
quota is refused from its Content-Length before a byte of its body is sent;
`wms submit` refuses such a submission before it uploads anything, with one
line that gives the figures, and counts a content the server holds already
as adding nothing, as the server does."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import patience
from tests.servers import ServerHandle, edited_config, running_server
from wms.core.sandboxes import MAX_LEFT_OUT

USER_BYTES = 2000
USERS = {name: (name, "lhcb_user", "lhcb", "user") for name in ("alice", "bob", "carol", "dave", "erin")}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerHandle]:
    tmp = tmp_path_factory.mktemp("sandbox-quotas")
    config = edited_config(tmp / "config-source", {
        "user_bytes: 5368709120": f"user_bytes: {USER_BYTES}"})
    with running_server(tmp / "server", config_dir=config, tokens=USERS) as handle:
        yield handle


def upload(server: ServerHandle, user: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    with server.api(server.issued[user]) as api:
        response = api.put(f"/sandboxes/{digest}", content=data,
                           headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 201, response.text
    return digest


def limits(server: ServerHandle, user: str, **params) -> tuple[int, dict]:
    with server.api(server.issued[user]) as api:
        response = api.get("/sandboxes/limits", params=params)
    return response.status_code, response.json()


def test_the_limits_report_the_quotas_and_what_the_caller_holds(server):
    held = upload(server, "alice", b"a" * 600)
    status, view = limits(server, "alice")
    assert status == 200
    assert (view["user_bytes"], view["user_held"]) == (USER_BYTES, 600)
    assert view["total_bytes"] == 536870912000 and view["total_held"] >= 600
    # The files about to be sent are left out: one the server holds already adds nothing.
    assert limits(server, "alice", sha256=[held])[1]["user_held"] == 0
    assert limits(server, "erin")[1]["user_held"] == 0          # erin uploads nothing in any test


@pytest.mark.parametrize(("digests", "says"), [
    (["abc"], "sha256: not a SHA-256 digest (64 lowercase hex digits): 'abc'"),
    (["a" * 64] * (MAX_LEFT_OUT + 1), f"sha256: {MAX_LEFT_OUT + 1} digests; at most {MAX_LEFT_OUT} may be named"),
])
def test_the_limits_refuse_what_is_not_a_list_of_digests(server, digests, says):
    status, view = limits(server, "alice", sha256=digests)
    assert status == 400 and view["detail"].startswith(says)


def test_an_upload_past_the_quota_is_refused_from_its_content_length_before_its_body(server):
    upload(server, "bob", b"b" * 600)
    head = "\r\n".join([f"PUT /api/v1/sandboxes/{'c' * 64} HTTP/1.1", "Host: test",
                        f"Authorization: Bearer {server.issued['bob']}", "Content-Type: application/octet-stream",
                        "Content-Length: 1500", "", ""])
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=patience(30)) as sock:
        sock.sendall(head.encode())                  # and not one byte of the body
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            piece = sock.recv(65536)
            if not piece:
                break
            answer += piece
    status_line, _, rest = answer.decode().partition("\r\n")
    assert status_line.split()[1] == "413"
    assert json.loads(rest.split("\r\n\r\n", 1)[1])["detail"] == (
        "user bob's sandboxes hold 600 bytes; the quota is 2,000 (sandboxes.user_bytes); this file adds 1,500")
    assert limits(server, "bob")[1]["user_held"] == 600


def job(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    listed = ", ".join(f'"{name}"' for name in files)
    jdl = directory / "job.jdl"
    jdl.write_text(f'[ Executable = "/bin/true"; CPUTime = 300; InputSandbox = {{{listed}}}; ]')
    return jdl


def test_wms_submit_past_the_quota_is_refused_before_anything_is_uploaded(server, tmp_path):
    upload(server, "dave", b"d" * 600)
    jdl = job(tmp_path / "job", {"big.dat": b"x" * 1000, "more.dat": b"y" * 500})
    done = server.wms("submit", str(jdl), token=server.issued["dave"])
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "wms submit: your sandboxes hold 600 bytes; the quota is 2,000 (sandboxes.user_bytes); this submission "
        "(2 InputSandbox files) adds 1,500; nothing was uploaded"]
    assert limits(server, "dave")[1]["user_held"] == 600               # nothing uploaded
    assert server.json("jobs", "--json", token=server.issued["dave"]) == []   # nothing stored


def test_wms_submit_counts_a_content_already_held_as_adding_nothing(server, tmp_path):
    upload(server, "carol", b"c" * 600)
    jdl = job(tmp_path / "job", {"again.dat": b"c" * 600, "new.dat": b"n" * 1400})   # 2,000: the quota exactly
    submitted = server.json("submit", str(jdl), "--json", token=server.issued["carol"])
    assert len(submitted["job_ids"]) == 1
    assert limits(server, "carol")[1]["user_held"] == USER_BYTES
