"""`wms bench http`: matching as pilots see it, over HTTP.

Fills a scratch database as `wms bench match` does, measures the Matcher
in-process on it (the reference of the same run), then starts a real
`wms server` on it and drives N concurrent pilots against
POST /api/v1/matcher/request-job, each on its own keep-alive connection
with its own pilot token, for a fixed time per N. With ``--batch K`` each
pilot offers K slots and asks POST /api/v1/matcher/request-jobs for up to
K jobs a request; every job handed out counts as a match. Reported per N:
matches per second, p50/p99 latency, errors, and the server's CPU time
per match (read from /proc), beside the in-process rate.

Each step starts with all N pilots arriving at once and a warm-up
(``--warm-up``, 5 s by default) in which nothing is counted but errors
and duplicates: what is measured is the rate N pilots keep up, not their
arrival. A thousand pilots arriving together are mostly refused (429) and
come back after the Retry-After, 5 to 7.5 s later; counting from the first
second mixes that crowd into the rate (docs/benchmarks.md).

The load generator runs on the same machine as the server and is part of
what is measured. It is a small asyncio HTTP/1.1 client (one connection
per pilot, Content-Length bodies, as uvicorn answers) rather than a
general one, so that it takes as little of the machine as it can.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from wms.bench.match import SLOTS, bench_config, pilot_request, pilots, populate, settle, top_up, waiting_per_task_queue
from wms.config import config_dir_from_env
from wms.core.errors import InvalidInput
from wms.core.identity import Identity
from wms.db.engine import make_engine
from wms.db.migrate import upgrade
from wms.db.scratch import scratch_database
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

PATH = "/api/v1/matcher/request-job"
BATCH_PATH = "/api/v1/matcher/request-jobs"
REQUEST_TIMEOUT = 60.0
# Seconds of waiting after which a pilot reconnects: uvicorn closes a
# connection idle for 5 s (its timeout_keep_alive).
IDLE_CLOSE = 4.0


# ---------------------------------------------------------------- the server
def set_backpressure(config_dir: Path, backpressure: dict[str, int] | None) -> None:
    """Replace keys of the backpressure section of ``config_dir``'s wms.yaml."""
    if backpressure:
        settings = yaml.safe_load((config_dir / "wms.yaml").read_text()) or {}
        settings.setdefault("backpressure", {}).update(backpressure)
        (config_dir / "wms.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))


def bench_config_dir(into: Path, backpressure: dict[str, int] | None = None) -> Path:
    """The configuration directory with room for every job (wms.bench.match.bench_config), on disk for a server;
    ``backpressure`` replaces keys of wms.yaml's backpressure section."""
    source = config_dir_from_env(None)
    target = into / "config"
    shutil.copytree(source, target)
    resources = yaml.safe_load((target / "resources.yaml").read_text())
    for site in resources["Sites"].values():
        for ce in (site.get("CEs") or {}).values():
            for queue in (ce.get("Queues") or {}).values():
                values = dict(queue.get("complex_values") or {})
                values["slots"] = SLOTS
                if "compiler_lic" in values:
                    values["compiler_lic"] = SLOTS
                queue["complex_values"] = values
    (target / "resources.yaml").write_text(yaml.safe_dump(resources, sort_keys=False))
    cluster = yaml.safe_load((target / "cluster.yaml").read_text()) or {}
    cluster.setdefault("global", {})["complex_values"] = {"compiler_lic": SLOTS}
    (target / "cluster.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    set_backpressure(target, backpressure)
    return target


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
LISTEN, ESTABLISHED = "0A", "01"


def _sockets(port: int, state: str) -> set[int] | None:
    """The inodes of this machine's TCP sockets on local ``port`` in ``state``
    (from /proc/net), or None where there is no /proc/net to read."""
    if not any(table.exists() for table in TCP_TABLES):
        return None
    inodes = set()
    for table in TCP_TABLES:
        with contextlib.suppress(OSError):
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                # local address "ADDR:PORT" in hex, then remote address, state, ..., inode
                if len(fields) > 9 and fields[3] == state and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(int(fields[9]))
    return inodes


def listeners(port: int) -> int | None:
    """How many sockets listen on TCP ``port`` (one per worker of `wms
    server --workers N`); None where /proc/net cannot tell."""
    found = _sockets(port, LISTEN)
    return None if found is None else len(found)


def connections_per_worker(pids: list[int], port: int) -> list[int] | None:
    """How many established connections to TCP ``port`` each of ``pids`` that
    listens there holds (one figure per worker of `wms server --workers N`),
    most first; None where /proc/net cannot tell."""
    established, listening = _sockets(port, ESTABLISHED), _sockets(port, LISTEN)
    if established is None or listening is None:
        return None
    counts = []
    for pid in pids:
        held = set()
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        held.add(int(target[8:-1]))
        if held & listening:                # a process that serves (not the supervisor, nor a helper)
            counts.append(len(held & established))
    return sorted(counts, reverse=True)


def raise_open_files_limit() -> None:
    """A thousand pilots are a thousand sockets on each side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Server:
    """A `wms server` process on ``url`` with ``config``, stopped on exit."""

    host = "127.0.0.1"

    def __init__(self, database_url: str, config: Path, log: Path, workers: int = 1) -> None:
        self.port = free_port()
        self.workers = workers
        env = {**os.environ, "WMS_DATABASE_URL": database_url, "WMS_CONFIG": str(config), "HOME": str(log.parent)}
        self.log = log
        with log.open("wb") as out:
            # Started outside any checkout: `python -m` puts its working
            # directory first on the path, which would pick a checkout's code
            # over the one installed or given by PYTHONPATH (a before/after run).
            self.process = subprocess.Popen([sys.executable, "-m", "wms.cli.main", "server", "--bind",
                                             f"127.0.0.1:{self.port}", "--workers", str(workers)],
                                            env=env, stdout=out, stderr=out, cwd=log.parent)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        """Until the server answers and every worker listens. The first
        worker answers while the others may still be starting, and a pilot's
        connection stays with the worker it reached first: pilots let in
        then all went to one worker in some runs, and the step measured one
        worker's rate."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"wms server exited: {self.log.read_text()[-2000:]}")
            try:
                answered = httpx.get(f"http://127.0.0.1:{self.port}/api/v1/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                answered = False
            if answered:
                listening = listeners(self.port)
                if listening is None or listening >= self.workers:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"wms server not ready within {timeout:.0f} s: {self.log.read_text()[-2000:]}")

    def _processes(self) -> dict[int, list[str]]:
        """The server process and its descendants (alive ones): pid -> the fields of /proc/PID/stat after the name."""
        found: dict[int, list[str]] = {}
        for stat in sorted(Path("/proc").glob("[0-9]*/stat"), key=lambda p: int(p.parent.name)):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == self.process.pid or ppid in found:
                found[pid] = fields
        return found

    def cpu_seconds(self) -> float | None:
        """User + system CPU time so far of the server process and its workers (alive ones)."""
        ticks = sum(int(fields[11]) + int(fields[12]) for fields in self._processes().values())
        return ticks / os.sysconf("SC_CLK_TCK")

    def connections_per_worker(self) -> list[int] | None:
        """How many of the pilots' connections each worker holds now, most first
        (None where /proc/net cannot tell). A kept-alive connection stays with
        the worker that accepted it, and the kernel spreads connections at
        random (SO_REUSEPORT): the worker holding more has its pilots wait
        longer, which shows in p99 (docs/benchmarks.md)."""
        return connections_per_worker(list(self._processes()), self.port)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------- the pilots
@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    matched: list[int] = field(default_factory=list)
    warm_up_matched: list[int] = field(default_factory=list)    # handed out too: checked for duplicates
    errors: list[str] = field(default_factory=list)
    refused: int = 0          # 429 with Retry-After: the server shedding load, waited out as a pilot does
    refused_without_retry_after: int = 0
    empty: int = 0            # answered without a job (no match)
    reconnects: int = 0       # answers with Connection: close (a worker over its share of connections)
    opens: float = 0.0        # loop time at which the warm-up ends: answers before it are not counted
    # The server's and this process's CPU seconds when counting starts.
    server_cpu_at_open: float | None = None
    connections_per_worker: list[int] | None = None
    client_cpu_at_open: float = 0.0


class RemoteServer:
    """A server already running at ``url`` (--url): nothing to start or stop,
    and its CPU time is not ours to read."""

    def __init__(self, url: str) -> None:
        import httpx

        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise InvalidInput(f"--url: expected http://HOST:PORT (the bench's client speaks plain HTTP), got {url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        try:
            httpx.get(f"http://{self.host}:{self.port}/api/v1/health", timeout=10).raise_for_status()
        except httpx.HTTPError as exc:
            raise InvalidInput(f"--url: {url} does not answer /api/v1/health: {exc}") from None

    def cpu_seconds(self) -> float | None:
        return None

    def connections_per_worker(self) -> list[int] | None:
        return None

    def stop(self) -> None:
        pass


def pilot_body(rng: random.Random, queues, pilot_id: str, batch: int | None = None) -> bytes:
    """A pilot's request; with ``batch`` K, K free slots and up to K jobs (request-jobs)."""
    request = pilot_request(rng, queues, 0)
    body = {
        "site": request.site, "ce": request.ce, "queue": request.queue, "host": request.host, "pilot_id": pilot_id,
        "slots": request.slots, "platform": request.platform, "cpu_time_left": request.cpu_time_left,
        "load": dict(request.load),
    }
    if batch is not None:
        body.update(slots=batch, count=batch)
    return json.dumps(body).encode()


def matched_jobs(answer: bytes, batch: int | None) -> list[int]:
    """The job ids an answer hands out: request-job's one, or request-jobs' list."""
    if batch is not None:
        return [job["JobID"] for job in json.loads(answer)["jobs"]]
    return [json.loads(answer)["job"]["JobID"]] if answer.startswith(b'{"match":true') else []


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes,
                   body: bytes) -> tuple[int, bytes, float | None, bool]:
    """One request on a kept-alive connection: the status, the body and the
    Retry-After of the answer, and whether the server closes the connection
    after it (``Connection: close``: a worker holding more than its share of
    the connections asks pilots to connect again, wms/api/balance.py)."""
    writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
    status = int((await reader.readline()).split(b" ", 2)[1])
    length = 0
    wait: float | None = None
    closing = False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"retry-after" and value.strip().isdigit():
            wait = float(value)
        elif name == b"connection":
            closing = b"close" in value.lower()
    return status, await reader.readexactly(length), wait, closing


async def pilot(k: int, host: str, port: int, token: str, queues, deadline: float, seed: int, tally: Tally,
                batch: int | None = None) -> None:
    rng = random.Random(seed * 100_003 + k)
    pilot_id = bench_pilot_id(k)
    head = (f"POST {BATCH_PATH if batch else PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: ").encode()
    loop = asyncio.get_running_loop()
    connection = None
    while loop.time() < deadline:
        try:
            if connection is None:
                connection = await asyncio.open_connection(host, port)
            body = pilot_body(rng, queues, pilot_id, batch)
            started = time.perf_counter()
            status, answer, wait, closing = await asyncio.wait_for(exchange(*connection, head, body),
                                                                   REQUEST_TIMEOUT)
            elapsed = time.perf_counter() - started
            if closing:
                connection = _close(connection)
                tally.reconnects += loop.time() >= tally.opens
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, IndexError) as exc:
            # Errors count in the warm-up too: "no errors" covers the pilots' arrival.
            tally.errors.append(f"{type(exc).__name__}: {exc}")
            connection = _close(connection)
            await asyncio.sleep(0.1)
            continue
        counted = loop.time() >= tally.opens
        if status == 429:
            # Load shed: wait as a pilot does (pilot/backoff.py: at least Retry-After, up to half more).
            if wait is None:
                tally.refused_without_retry_after += 1
                wait = 1.0
            tally.refused += counted
            if wait >= IDLE_CLOSE:      # the server closes idle connections: come back on a new one
                connection = _close(connection)
            await asyncio.sleep(min(wait * (1 + rng.random() / 2), max(0.0, deadline - loop.time())))
            continue
        if status != 200:
            tally.errors.append(f"HTTP {status}: {answer[:200].decode(errors='replace')}")
            continue
        jobs = matched_jobs(answer, batch)
        if counted:
            tally.latencies.append(elapsed)
            tally.matched.extend(jobs)
            tally.empty += not jobs
        else:
            tally.warm_up_matched.extend(jobs)
    _close(connection)


def _close(connection) -> None:
    if connection is not None:
        connection[1].close()
    return None


async def drive(count: int, host: str, port: int, tokens: list[str], queues, seconds: float, seed: int,
                batch: int | None = None, warm_up: float = 0.0, server_cpu=lambda: None,
                server_split=lambda: None) -> Tally:
    """``count`` pilots together for ``warm_up`` + ``seconds``; what is answered in
    the last ``seconds`` is counted (``server_cpu`` reads the server's CPU seconds
    and ``server_split`` its connections per worker when counting starts)."""
    loop = asyncio.get_running_loop()
    tally = Tally(opens=loop.time() + warm_up)
    deadline = tally.opens + seconds

    async def open_window() -> None:
        await asyncio.sleep(warm_up)
        tally.server_cpu_at_open, tally.client_cpu_at_open = server_cpu(), time.process_time()
        tally.connections_per_worker = server_split()

    await asyncio.gather(open_window(), *(pilot(k, host, port, tokens[k], queues, deadline, seed, tally, batch)
                                          for k in range(count)))
    return tally


def bench_pilot_id(k: int) -> str:
    return f"bench-http-{k}"


def pilot_tokens(engine, count: int) -> list[str]:
    """One pilot token per pilot, bound to its pilot id, as a SiteDirector hands them out
    (an unbound one would cost a write on its first request, as a hand-made token does)."""
    now = datetime.now(timezone.utc)
    return [create_token(engine, Identity(user=f"pilot{k}", group="lhcb_pilot", vo="lhcb", role="pilot",
                                          pilot_id=bench_pilot_id(k)), now,
                         description="wms bench http", lifetime=timedelta(hours=2))
            for k in range(count)]


# ---------------------------------------------------------------- one run
def quiet_collector() -> None:
    """Take what the bench holds (the filled runtime, the tallies so far) out
    of the garbage collector's way before a step, as the server does at
    start-up: a full collection over it paused the load generator for 50 to
    80 ms, and every request in flight counted the pause as latency."""
    gc.collect()
    gc.freeze()


def percentile(ordered: list[float], q: float) -> float | None:
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def backpressure_options(args) -> dict[str, int]:
    """--max-in-flight, --retry-after, --request-threads and --match-threads, for the server's wms.yaml."""
    chosen = {"max_in_flight": getattr(args, "max_in_flight", None), "retry_after": getattr(args, "retry_after", None),
              "request_threads": getattr(args, "request_threads", None),
              "match_threads": getattr(args, "match_threads", None)}
    return {key: value for key, value in chosen.items() if value is not None}


def step_order(counts: list[int], order: str) -> list[int]:
    """The steps of one run. "ladder": the counts as given. "balanced": each
    count once in every position (the counts rotated, one round per count),
    because the steps of one run drift (docs/journal/benchmarks.md, "Crowds against
    32 pilots"): a count that always comes later would pay for the drift."""
    if order != "balanced":
        return list(counts)
    distinct = list(dict.fromkeys(counts))
    return [distinct[(start + i) % len(distinct)] for start in range(len(distinct)) for i in range(len(distinct))]


def run_http_once(url: str, args, tmp: Path, steps: list[int]) -> dict[str, Any]:
    remote = RemoteServer(args.url) if getattr(args, "url", None) else None    # answering, before any work
    engine = make_engine(url)
    upgrade(engine)
    runtime = Runtime.create(bench_config(None), engine)
    populate(runtime, args.jobs, args.task_queues, random.Random(args.seed))
    settle(engine)
    full = waiting_per_task_queue(runtime)
    refill = random.Random(args.seed)
    queues = runtime.resources_for("lhcb").queues()
    print(f"  in-process: {args.threads} threads for {args.seconds:.0f} s", file=sys.stderr)
    reference = pilots(url, args.threads, args.seconds, args.seed, time.time())
    in_process = len(reference["matched"]) / args.seconds
    top_up(runtime, full, refill)      # every step starts from the population of the first
    tokens = pilot_tokens(engine, max(args.pilots))
    server = remote or Server(url, bench_config_dir(tmp, backpressure_options(args)), tmp / "server.log",
                              workers=args.workers)
    rows = []
    handed: list[int] = [*reference["matched"]]
    try:
        for count in steps:
            quiet_collector()
            warm_up = getattr(args, "warm_up", 0.0)
            print(f"  over HTTP: {count} pilots, {warm_up:g} s of warm-up then {args.seconds:g} s counted",
                  file=sys.stderr)
            tally = asyncio.run(drive(count, server.host, server.port, tokens, queues, args.seconds, args.seed,
                                      getattr(args, "batch", None), warm_up, server.cpu_seconds,
                                      server.connections_per_worker))
            cpu_after, own_after = server.cpu_seconds(), time.process_time()
            cpu_before = tally.server_cpu_at_open
            cpu = None if cpu_after is None or cpu_before is None else cpu_after - cpu_before
            ordered = sorted(tally.latencies)
            matches = len(tally.matched)
            handed.extend(tally.warm_up_matched + tally.matched)
            top_up(runtime, full, refill)
            rows.append({
                "pilots": count,
                "matches_per_second": round(matches / args.seconds, 1),
                "requests_per_second": round(len(ordered) / args.seconds, 1),
                # the pilots' arrival: what they were handed while the step warmed up
                "warm_up_matches_per_second": round(len(tally.warm_up_matched) / warm_up, 1) if warm_up else None,
                "no_match_per_second": round(tally.empty / args.seconds, 1),
                "reconnects_per_second": round(tally.reconnects / args.seconds, 1),
                "p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99),
                "errors": len(tally.errors), "first_error": tally.errors[0] if tally.errors else None,
                "refused_per_second": round(tally.refused / args.seconds, 1),
                "refused_without_retry_after": tally.refused_without_retry_after,
                "server_cpu_ms_per_match": round(1000 * cpu / matches, 2) if matches and cpu is not None else None,
                "client_cpu_seconds": round(own_after - tally.client_cpu_at_open, 2),
                "in_process_ratio": round(matches / args.seconds / in_process, 3) if in_process else None,
                "connections_per_worker": tally.connections_per_worker,
            })
    finally:
        server.stop()
        engine.dispose()
    return {"in_process_matches_per_second": round(in_process, 1), "rows": rows,
            "duplicates": len(handed) - len(set(handed))}


def run_http(args) -> int:
    raise_open_files_limit()
    kind = args.database if args.database in ("sqlite", "postgresql", "mariadb") else None
    runs = []
    steps = step_order(args.pilots, getattr(args, "order", "ladder"))
    for run in range(1, args.runs + 1):
        print(f"run {run}/{args.runs} on {args.database}: {args.jobs} jobs, {args.task_queues} task queues, "
              f"pilots {','.join(map(str, steps))}", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            if kind is None:
                runs.append(run_http_once(args.database, args, Path(tmp), steps))
                continue
            with scratch_database(kind, Path(tmp), prefix="wms_bench") as url:
                runs.append(run_http_once(url, args, Path(tmp), steps))
    summary = summarise(args, runs)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_table(summary)
    return 0 if summary["duplicates"] == 0 else 1


def summarise(args, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the runs' steps, per number of pilots; ``of_first``: a
    number's median rate against the first number's (at 32, 256, 1000: the
    crowds against 32 pilots)."""

    def median(values):
        known = [v for v in values if v is not None]
        return round(statistics.median(known), 2) if known else None

    rows = []
    for count in dict.fromkeys(args.pilots):
        per_step = [row for r in runs for row in r["rows"] if row["pilots"] == count]
        rows.append({"pilots": count, "steps": len(per_step), **{key: median(row[key] for row in per_step) for key in (
            "matches_per_second", "p50_ms", "p99_ms", "server_cpu_ms_per_match", "in_process_ratio",
            "refused_per_second", "no_match_per_second", "reconnects_per_second")},
            "errors": sum(row["errors"] for row in per_step),
            "refused_without_retry_after": sum(row.get("refused_without_retry_after", 0) for row in per_step),
            "first_error": next((row["first_error"] for row in per_step if row["first_error"]), None),
            # each run's, as the kernel spread the pilots' connections
            "connections_per_worker": [row.get("connections_per_worker") for row in per_step]})
    first = rows[0]["matches_per_second"] if rows else None
    for row in rows:
        rate = row["matches_per_second"]
        row["of_first"] = round(rate / first, 3) if first and rate is not None else None
    return {"benchmark": "http", "database": args.database, "workers": args.workers,
            "order": getattr(args, "order", "ladder"),
            "batch": getattr(args, "batch", None),
            "backpressure": backpressure_options(args), "jobs": args.jobs,
            "task_queues": args.task_queues,
            "seconds": args.seconds, "warm_up": getattr(args, "warm_up", 0.0), "runs": len(runs),
            "in_process_matches_per_second": median(r["in_process_matches_per_second"] for r in runs),
            "duplicates": sum(r["duplicates"] for r in runs), "rows": rows, "raw": runs}


def print_table(summary: dict[str, Any]) -> None:
    def shown(value, fmt="{:.1f}"):
        return "-" if value is None else fmt.format(value)

    batch = f", up to {summary['batch']} jobs a request" if summary.get("batch") else ""
    print(f"http on {summary['database']}, {summary['workers']} server worker(s){batch}: {summary['jobs']} jobs, {summary['task_queues']} task queues, "
          f"{summary['seconds']:g} s counted per step after {summary.get('warm_up', 0):g} s of warm-up, steps in "
          f"{summary.get('order', 'ladder')} order, medians of {summary['runs']} run(s); in-process "
          f"{summary['in_process_matches_per_second']:.0f} matches/s; duplicates {summary['duplicates']}")
    first = summary["rows"][0]["pilots"] if summary["rows"] else "-"
    header = ("pilots", "steps", "matches/s", "of in-process", f"of {first} pilots", "p50 ms", "p99 ms", "errors",
              "refused/s (429)", "no match/s", "reconnects/s", "server CPU ms/match", "connections per worker")
    table = [header] + [(
        str(r["pilots"]), str(r.get("steps", "-")), shown(r["matches_per_second"], "{:.0f}"),
        shown(r["in_process_ratio"], "{:.0%}"), shown(r.get("of_first"), "{:.0%}"),
        shown(r["p50_ms"]), shown(r["p99_ms"]), str(r["errors"]), shown(r.get("refused_per_second"), "{:.0f}"),
        shown(r.get("no_match_per_second"), "{:.0f}"), shown(r.get("reconnects_per_second")),
        shown(r["server_cpu_ms_per_match"], "{:.2f}"),
        " ".join("/".join(map(str, split)) if split else "-" for split in r.get("connections_per_worker") or [None]),
    ) for r in summary["rows"]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))
    for r in summary["rows"]:
        if r["first_error"]:
            print(f"first error at {r['pilots']} pilots: {r['first_error']}")
