"""A token revoked with `wms admin token revoke` is refused by every worker
of every server within a second (docs/security.md, "Tokens end"), and
the request path still reads nothing to authenticate a token it verified.

Each server keeps the tokens it verified; the revocation is made by
another process (the CLI, on the database), as an administrator makes it.
Several connections at once are spread over the workers by the kernel,
and the test checks that each worker holds some of them, so that every
worker's cache holds the token when it is revoked.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import event

from tests.helpers import wait_until
from tests.servers import ServerHandle, free_port, running_server
from wms.bench.over_http import connections_per_worker, listeners
from wms.services.tokens import LOOK_AHEAD, REVOCATION_WINDOW

pytestmark = pytest.mark.databases

CONNECTIONS = 12        # per server: all of them on one of two workers by chance once in 2,000 runs
HAMMER_AFTER = 2.0      # seconds of requests after the revocation


def port_of(server: ServerHandle) -> int:
    return int(server.url.rsplit(":", 1)[1])


def serving_processes(server: ServerHandle) -> list[int]:
    """The server process and its descendants (its workers)."""
    found = [server.process.pid]
    for stat in sorted(Path("/proc").glob("[0-9]*/stat"), key=lambda p: int(p.parent.name)):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid in found:
            found.append(int(stat.parent.name))
    return found


class Hammer:
    """A thread per client sending GET /jobs until ``stop_at`` (set later):
    (sent at, status, detail) of each answer."""

    def __init__(self, clients: list[httpx.Client]) -> None:
        self.stop_at = float("inf")
        self.answers: list[tuple[float, int, str]] = []
        self.threads = [threading.Thread(target=self.run, args=(client,)) for client in clients]
        for thread in self.threads:
            thread.start()

    def run(self, client: httpx.Client) -> None:
        while (sent := time.monotonic()) < self.stop_at:
            answer = client.get("/jobs", params={"status": "Running"})
            detail = answer.json().get("detail", "") if answer.status_code != 200 else ""
            self.answers.append((sent, answer.status_code, detail))

    def stop(self, at: float) -> None:
        self.stop_at = at
        for thread in self.threads:
            thread.join()


def revoked_everywhere_within_the_window(servers: list[ServerHandle], token: str) -> None:
    """Every connection to every worker verifies ``token``; it is revoked by
    `wms admin token revoke` while they send requests (busy workers: each
    look is made aside); no request sent a window after the command
    returned is accepted, and each connection is refused, saying why."""
    for server in servers:      # the first worker answers while the second may still be starting
        wait_until(lambda: listeners(port_of(server)) == 2, timeout=60, what="both workers listening")
    clients = [server.api(token) for server in servers for _ in range(CONNECTIONS)]
    try:
        for client in clients:
            assert client.get("/jobs", params={"status": "Running"}).status_code == 200
        for server in servers:
            spread = connections_per_worker(serving_processes(server), port_of(server))
            assert spread is not None and len(spread) == 2 and min(spread) > 0, spread    # each worker verified it
        [row] = [r for r in servers[0].json("admin", "token", "list") if r["User"] == "zoe"]
        hammer = Hammer(clients)
        try:
            time.sleep(LOOK_AHEAD * 2)
            before = time.monotonic()
            servers[0].ok("admin", "token", "revoke", row["ID"])
            revoked = time.monotonic()                              # the revocation was committed before this
        finally:
            hammer.stop(time.monotonic() + HAMMER_AFTER)
    finally:
        for client in clients:
            client.close()
    answers = [(sent - revoked, status, detail) for sent, status, detail in hammer.answers]
    late = [(round(after, 3), status) for after, status, _ in answers if after > REVOCATION_WINDOW and status != 401]
    assert late == [], f"accepted more than {REVOCATION_WINDOW} s after the revocation: {late[:10]}"
    refused = [(after, detail) for after, status, detail in answers if status == 401]
    assert len(refused) >= len(clients) and all(after > before - revoked for after, _ in refused)
    assert all(f"token {row['ID']} was revoked at" in detail for _, detail in refused)
    print(f"the command took {revoked - before:.3f} s; first refusal at {min(after for after, _ in refused):.3f} s "
          "after it returned, last acceptance "
          f"{max((after for after, status, _ in answers if status == 200), default=float('nan')):.3f} s; "
          f"{len(answers)} requests")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_a_revoked_token_is_refused_by_every_worker_within_a_second(backend, database_factory, tmp_path):
    with running_server(tmp_path, database_url=database_factory(backend), server_args=("--workers", "2"),
                        tokens={"zoe": ("zoe", "lhcb_user", "lhcb", "user")}) as server:
        revoked_everywhere_within_the_window([server], server.issued["zoe"])


def test_a_revoked_token_is_refused_by_every_server_on_the_database_within_a_second(database_factory, tmp_path):
    with running_server(tmp_path, database_url=database_factory("postgresql"), server_args=("--workers", "2"),
                        tokens={"zoe": ("zoe", "lhcb_user", "lhcb", "user")}) as first:
        (tmp_path / "second").mkdir()
        second_url = f"http://127.0.0.1:{free_port()}"
        second = ServerHandle(tmp_path / "second", first.config, second_url, {**first.env, "WMS_URL": second_url},
                              ("--workers", "2"))
        second.start()
        try:
            revoked_everywhere_within_the_window([first, second], first.issued["zoe"])
        finally:
            second.stop()


def test_a_verified_token_costs_no_database_read_per_request(runtime, client, tokens):
    """Requests for a second and a half with a token the cache holds: the
    token is read once, and the note of ended tokens at most once per
    LOOK_AHEAD, whatever the number of requests."""
    engine = runtime.engine
    headers = {"Authorization": f"Bearer {tokens['roland']}"}
    assert client.get("/api/v1/jobs", headers=headers).status_code == 200
    reads: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM tokens" in statement:
            reads.append("token")
        elif "ended_tokens" in str(parameters):
            reads.append("note")

    event.listen(engine, "before_cursor_execute", count)
    try:
        started = time.monotonic()
        requests = 0
        # At least a second and a half and fifty requests, however slow a loaded machine answers.
        while time.monotonic() - started < 1.5 or requests < 50:
            assert client.get("/api/v1/jobs", headers=headers).status_code == 200
            requests += 1
        elapsed = time.monotonic() - started
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert reads.count("token") == 0
    assert reads.count("note") <= elapsed / LOOK_AHEAD + 1
