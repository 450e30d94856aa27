"""`wms server --workers N`: several processes share the port, each with its own runtime."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import REPO
from tests.servers import free_port, running_server
from wms.server import StartupError, WorkerSockets, _no_delay_on_shared_sockets, listening_socket


def test_connections_accepted_on_a_shared_socket_have_nagle_off():
    """uvicorn's shared socket has protocol 0; asyncio would leave Nagle on for its connections."""
    import asyncio.base_events as base_events

    original = base_events._set_nodelay
    try:
        _no_delay_on_shared_sockets()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)       # protocol 0, as uvicorn makes it
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        assert accepted.proto == 0
        base_events._set_nodelay(accepted)
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        for sock in (client, accepted, listener):
            sock.close()
    finally:
        base_events._set_nodelay = original


def test_two_workers_serve_the_api(tmp_path):
    with running_server(tmp_path, server_args=("--workers", "2")) as server:
        workers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == server.process.pid]
        assert len(workers) >= 2, server.log.read_text()[-3000:]
        assert "with 2 worker processes" in server.log.read_text()
        answer = httpx.get(f"{server.url}/api/v1/jobs", timeout=10)
        assert answer.status_code == 401                        # each worker checks tokens against the database


def test_a_worker_over_its_share_of_connections_asks_clients_to_connect_again(tmp_path, monkeypatch):
    """With a third worker that claims none of the connections (a count file
    kept fresh here), both real workers hold more than their share: they
    answer some requests with Connection: close, and clients that keep their
    connections alive connect again without a failed request."""
    import threading

    shares = tmp_path / "shares"
    shares.mkdir()
    ghost = shares / "ghost.connections"
    monkeypatch.setenv("WMS_WORKER_SHARES", str(shares))
    with running_server(tmp_path, server_args=("--workers", "2")) as server:
        answers: list[httpx.Response] = []
        stop = time.monotonic() + 5

        def client() -> None:
            with httpx.Client(base_url=server.url, timeout=10) as http:
                while time.monotonic() < stop:
                    answers.append(http.get("/api/v1/health"))
                    time.sleep(0.02)

        clients = [threading.Thread(target=client) for _ in range(8)]
        for thread in clients:
            thread.start()
        while any(thread.is_alive() for thread in clients):
            ghost.write_text("0")                               # a worker with no connection, still alive
            time.sleep(0.2)
        for thread in clients:
            thread.join()
        counts = sorted(p.name for p in shares.glob("*.connections"))
    assert len(counts) == 3, counts                             # both workers publish their counts
    assert answers and all(answer.status_code == 200 for answer in answers)
    closing = [a for a in answers if a.headers.get("connection", "").lower() == "close"]
    assert closing, "no answer asked its client to connect again"


def test_workers_must_be_a_positive_number():
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "server", "--workers", "0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "a whole number of at least 1, got '0'" in run.stderr


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_each_worker_listens_on_its_own_socket_and_connections_are_spread_over_them():
    """32 pilots connecting at once: with one shared socket one worker could
    accept them all; with a socket per worker the kernel spreads them."""
    import pickle
    from multiprocessing.reduction import ForkingPickler

    port = free_port()
    held = WorkerSockets("127.0.0.1", port)
    # What each spawned worker gets: the supervisor's object, pickled as multiprocessing does.
    workers = [pickle.loads(ForkingPickler.dumps(held)) for _ in range(2)]
    for listener in workers:
        listener.listen()                   # as uvicorn does when the worker starts serving
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(32)]
    try:
        accepted = []
        for listener in workers:
            assert listener.getsockname() == ("127.0.0.1", port)
            listener.setblocking(False)
            count = 0
            with contextlib.suppress(BlockingIOError):
                while True:
                    listener.accept()[0].close()
                    count += 1
            accepted.append(count)
        assert sum(accepted) == 32 and min(accepted) > 0, accepted
    finally:
        for sock in [*clients, *workers, held]:
            sock.close()


def test_the_port_of_a_server_with_workers_is_refused_to_another_server():
    import pickle
    from multiprocessing.reduction import ForkingPickler

    port = free_port()
    with WorkerSockets("127.0.0.1", port) as held, pickle.loads(ForkingPickler.dumps(held)) as worker:
        worker.listen()
        for start in (listening_socket, WorkerSockets):
            with pytest.raises(StartupError, match="Address already in use"):
                start("127.0.0.1", port)
    listening_socket("127.0.0.1", port).close()        # free again once the server has stopped


def test_start_up_leaves_what_it_built_out_of_later_collections():
    code = ("import gc; from wms.server import freeze_start_up_heap; "
            "before = gc.get_freeze_count(); freeze_start_up_heap(); print(before, gc.get_freeze_count())")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    before, after = map(int, run.stdout.split())
    assert before == 0 and after > 10_000      # the modules, the configuration's classes, their functions
