"""`wms bench http` runs a real server and real pilots over HTTP, and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO


def bench_http(tmp_path, *options: str) -> dict:
    """`wms bench http --json` on a SQLite database in ``tmp_path``: its summary."""
    run = subprocess.run(
        [sys.executable, "-m", "wms.cli.main", "bench", "http", "--database", f"sqlite:///{tmp_path / 'b.db'}",
         *options, "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_bench_http_reports_matches_latency_and_server_cpu(tmp_path):
    summary = bench_http(tmp_path, "--jobs", "4000", "--task-queues", "20", "--pilots", "1,3", "--seconds", "1.5",
                         "--warm-up", "0.5", "--threads", "2")
    assert summary["duplicates"] == 0 and summary["in_process_matches_per_second"] > 0
    assert [row["pilots"] for row in summary["rows"]] == [1, 3] and summary["warm_up"] == 0.5
    for row in summary["raw"][0]["rows"]:
        # Jobs handed out in the warm-up are reported apart, not in the step's rate.
        assert row["warm_up_matches_per_second"] > 0
    for row in summary["rows"]:
        assert row["errors"] == 0, row["first_error"]
        assert row["matches_per_second"] > 0 and row["p50_ms"] <= row["p99_ms"]
        assert row["no_match_per_second"] >= 0
        assert row["server_cpu_ms_per_match"] > 0


def test_bench_http_refuses_a_bad_list_of_pilots():
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--pilots", "4,zero"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "a comma-separated list of numbers, got '4,zero'" in run.stderr


def test_bench_http_batch_asks_for_several_jobs_a_request(tmp_path):
    summary = bench_http(tmp_path, "--jobs", "4000", "--task-queues", "20", "--pilots", "2", "--seconds", "1.5",
                         "--threads", "2", "--warm-up", "0", "--batch", "4")
    assert summary["batch"] == 4 and summary["duplicates"] == 0
    [row] = summary["raw"][0]["rows"]
    assert row["errors"] == 0, row["first_error"]
    # More jobs than requests: the answers carry several jobs each.
    assert row["matches_per_second"] > row["requests_per_second"] > 0


def test_bench_http_refuses_a_warm_up_that_is_not_a_number_of_seconds():
    for bad in ("-1", "soon", "nan"):
        run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--warm-up", bad],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and f"a number of seconds, 0 or more, got '{bad}'" in run.stderr


def test_bench_http_refuses_a_batch_over_64():
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--batch", "65"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "at most 64 jobs a request, got '65'" in run.stderr


def test_bench_http_drives_a_server_already_running_at_url(tmp_path):
    """--url: no server of its own; the database given is the running server's, filled by the bench."""
    from tests.servers import running_server
    from wms.bench.over_http import bench_config_dir

    database_url = f"sqlite:///{tmp_path / 'shared.db'}"
    with running_server(tmp_path / "server", bench_config_dir(tmp_path), database_url=database_url) as server:
        run = subprocess.run(
            [sys.executable, "-m", "wms.cli.main", "bench", "http", "--url", server.url, "--database", database_url,
             "--jobs", "2000", "--task-queues", "10", "--pilots", "2", "--seconds", "1.5", "--warm-up", "0", "--threads", "2", "--json"],
            cwd=REPO, capture_output=True, text=True, timeout=300, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert run.returncode == 0, run.stderr[-3000:]
        log = server.log.read_text()
    [row] = json.loads(run.stdout)["rows"]
    assert row["errors"] == 0 and row["matches_per_second"] > 0, row["first_error"]
    assert row["server_cpu_ms_per_match"] is None          # another's process: not measured
    assert "/api/v1/matcher/request-job" in log            # the pilots asked that server


def test_bench_http_url_needs_the_servers_database_and_an_answering_server(tmp_path):
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--url", "http://127.0.0.1:9",
                          "--database", "postgresql"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "give --database the URL of that server's database" in run.stderr
    run = subprocess.run([sys.executable, "-m", "wms.cli.main", "bench", "http", "--url", "http://127.0.0.1:9",
                          "--database", f"sqlite:///{tmp_path / 'b.db'}", "--jobs", "10", "--task-queues", "2",
                          "--seconds", "0.2", "--threads", "1"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 1 and "--url: http://127.0.0.1:9 does not answer /api/v1/health" in run.stderr, run.stderr


def test_every_step_starts_from_the_waiting_jobs_the_first_met(tmp_path):
    """Matching drains task queues; the bench puts the jobs back between steps,
    or later steps would measure a thinner population (more no-matches)."""
    import random
    from datetime import datetime, timezone

    from wms.bench.match import bench_config, pilot_request, populate, top_up, waiting_per_task_queue
    from wms.db.engine import make_engine
    from wms.db.migrate import upgrade
    from wms.services.matcher import request_job
    from wms.services.runtime import Runtime

    engine = make_engine(f"sqlite:///{tmp_path / 'b.db'}")
    upgrade(engine)
    runtime = Runtime.create(bench_config(str(REPO / "config")), engine)
    populate(runtime, 300, 10, random.Random(1))
    full = waiting_per_task_queue(runtime)
    assert sum(full.values()) == 300
    queues = runtime.resources_for("lhcb").queues()
    rng = random.Random(2)
    now = datetime.now(timezone.utc)
    taken = [request_job(runtime, pilot_request(rng, queues, n), now).job for n in range(40)]
    matched = sum(job is not None for job in taken)
    assert matched > 0 and sum(waiting_per_task_queue(runtime).values()) == 300 - matched
    assert top_up(runtime, full, random.Random(3)) == matched
    assert waiting_per_task_queue(runtime) == full
    engine.dispose()


def test_the_server_under_test_gets_the_backpressure_asked_for(tmp_path, monkeypatch):
    """--max-in-flight, --retry-after, --request-threads and --match-threads reach the server's wms.yaml."""
    from argparse import Namespace

    from wms.bench.over_http import backpressure_options, bench_config_dir
    from wms.config import load_config

    monkeypatch.setenv("WMS_CONFIG", str(REPO / "config"))
    asked = Namespace(max_in_flight=80, retry_after=None, request_threads=3, match_threads=1)
    assert backpressure_options(asked) == {"max_in_flight": 80, "request_threads": 3, "match_threads": 1}
    chosen = load_config(bench_config_dir(tmp_path, backpressure_options(asked))).settings.backpressure
    assert (chosen.max_in_flight, chosen.retry_after, chosen.request_threads, chosen.match_threads) == (80, 5, 3, 1)


def test_listeners_counts_the_sockets_listening_on_a_port_one_per_worker():
    """The bench lets its pilots in once every worker listens (a kept-alive
    connection stays with the worker it reached first)."""
    import socket

    from wms.bench.over_http import free_port, listeners

    port = free_port()
    assert listeners(port) == 0
    sockets = []
    try:
        for _ in range(2):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("127.0.0.1", port))
            sockets.append(sock)
        assert listeners(port) == 0                 # bound, as the supervisor's, is not listening
        sockets[0].listen()
        assert listeners(port) == 1
        sockets[1].listen()
        assert listeners(port) == 2
    finally:
        for sock in sockets:
            sock.close()


def test_bench_http_reports_how_the_connections_were_spread_over_the_workers(tmp_path):
    summary = bench_http(tmp_path, "--jobs", "2000", "--task-queues", "10", "--pilots", "6", "--workers", "2",
                         "--seconds", "1", "--warm-up", "0.5", "--threads", "1")
    row = summary["raw"][0]["rows"][0]
    split = row["connections_per_worker"]
    assert len(split) == 2 and sum(split) == 6 and split == sorted(split, reverse=True), split


def test_the_bench_counts_the_answers_that_close_their_connection():
    """A worker over its share answers with ``Connection: close``; the pilot
    connects again, and the step reports how often (reconnects/s)."""
    import asyncio

    from wms.bench.over_http import drive
    from wms.core.resources import QueueRef

    answers = {"all": 0, "closing": 0, "connections": 0}

    async def main():
        async def serve(reader, writer):
            answers["connections"] += 1
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return                                          # the pilot's time is up
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                body = b'{"match":false,"reason":"no waiting job"}'
                answers["all"] += 1
                close = answers["all"] % 2 == 1                     # every other answer closes
                answers["closing"] += close
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode()
                             + (b"\r\nConnection: close" if close else b"") + b"\r\n\r\n" + body)
                await writer.drain()
                if close:
                    writer.close()
                    return

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await drive(1, "127.0.0.1", port, ["t"], [QueueRef("LCG.X.ch", "ce.x", "q")], 0.5, 1)

    tally = asyncio.run(main())
    assert tally.errors == [] and tally.reconnects == answers["closing"] > 3
    assert answers["connections"] in (answers["closing"], answers["closing"] + 1)   # each close: a new one


def test_a_balanced_order_puts_each_number_of_pilots_once_in_every_position():
    from wms.bench.over_http import step_order

    steps = step_order([32, 256, 1000], "balanced")
    assert steps == [32, 256, 1000, 256, 1000, 32, 1000, 32, 256]
    for position in range(3):
        assert sorted(steps[position::3]) == [32, 256, 1000]
    assert step_order([32, 256, 1000], "ladder") == [32, 256, 1000]


def test_bench_http_balanced_reports_each_number_of_pilots_over_its_steps(tmp_path):
    summary = bench_http(tmp_path, "--jobs", "2000", "--task-queues", "10", "--pilots", "1,2", "--order", "balanced",
                         "--seconds", "0.5", "--warm-up", "0", "--threads", "1")
    assert summary["order"] == "balanced" and summary["duplicates"] == 0
    assert [row["pilots"] for row in summary["raw"][0]["rows"]] == [1, 2, 2, 1]
    one, two = summary["rows"]
    assert (one["pilots"], one["steps"], two["pilots"], two["steps"]) == (1, 2, 2, 2)
    assert one["of_first"] == 1.0 and two["of_first"] > 0
    assert two["of_first"] == round(two["matches_per_second"] / one["matches_per_second"], 3)
