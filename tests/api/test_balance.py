"""Kept-alive connections shared out between the workers (wms/api/balance.py)."""

from __future__ import annotations

import os
import time

from wms.api.balance import HELD_S, PERIOD_S, Shares


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def periods(clock: Clock, workers: dict[Shares, list], count: int) -> dict[Shares, list]:
    """``count`` periods in which every worker answers once on each connection it
    holds; the connections each was told to close in the last one (and no longer holds)."""
    closed: dict[Shares, list] = {}
    for _ in range(count):
        for shares, connections in workers.items():
            closed[shares] = [c for c in connections if shares.last_answer(c)]
            connections[:] = [c for c in connections if c not in closed[shares]]
        clock.now += PERIOD_S
    return closed


# Periods enough for every worker's own count to be whole.
SETTLED = int(HELD_S / PERIOD_S) + 1


def test_a_worker_over_its_share_asks_its_excess_to_connect_again():
    """22 and 10 of 32 connections: the fuller worker closes 6, down to its share of 16."""
    import tempfile
    from pathlib import Path

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        full, light = Shares(Path(tmp), "101", 2, clock), Shares(Path(tmp), "102", 2, clock)
        held = {light: [("10.0.0.1", p) for p in range(10)], full: [("10.0.0.2", p) for p in range(22)]}
        closed = periods(clock, held, SETTLED)
        assert len(closed[full]) == 6 and closed[light] == []
        assert len(held[full]) == 16
        held[light].extend(closed[full])                            # they connect again, to the other here
        assert periods(clock, held, SETTLED) == {full: [], light: []}     # 16/16: nothing more


def test_an_odd_connection_stays_where_it_is(tmp_path):
    clock = Clock()
    a, b = Shares(tmp_path, "1", 2, clock), Shares(tmp_path, "2", 2, clock)
    closed = periods(clock, {a: list(range(17)), b: list(range(16))}, SETTLED + 2)
    assert closed == {a: [], b: []}                                 # 17/16: the share of 33 is 17


def test_the_shares_even_out_as_closed_connections_come_back_by_chance(tmp_path):
    import random

    clock = Clock()
    rng = random.Random(7)
    a, b = Shares(tmp_path, "1", 2, clock), Shares(tmp_path, "2", 2, clock)
    held = {a: [("p", k) for k in range(26)], b: [("p", k) for k in range(26, 32)]}
    for _ in range(30):
        closed = periods(clock, held, 1)
        for connection in [c for gone in closed.values() for c in gone]:
            held[rng.choice([a, b])].append(connection)             # the kernel's pick of a new connection
    assert sorted(len(c) for c in held.values()) in ([16, 16], [15, 17])
    assert sum(len(c) for c in held.values()) == 32                 # every pilot still connected


def test_a_silent_connection_is_no_longer_counted(tmp_path):
    clock = Clock()
    a, b = Shares(tmp_path, "1", 2, clock), Shares(tmp_path, "2", 2, clock)
    held = {a: list(range(8)), b: list(range(8, 12))}
    periods(clock, {a: held[a], b: held[b]}, 1)
    # Four of a's connections fall silent (their pilots run jobs): 4 held against 4.
    assert periods(clock, {a: held[a][:4], b: held[b]}, SETTLED + 2) == {a: [], b: []}


def test_the_count_of_a_worker_that_stopped_is_ignored(tmp_path):
    clock = Clock()
    stale = tmp_path / "999.connections"
    stale.write_text("50")
    past = time.time() - 10 * HELD_S
    os.utime(stale, (past, past))
    alone = Shares(tmp_path, "1", 1, clock)
    assert periods(clock, {alone: list(range(8))}, SETTLED + 1) == {alone: []}


def test_a_single_worker_closes_nothing(tmp_path):
    clock = Clock()
    alone = Shares(tmp_path, "1", 1, clock)
    assert periods(clock, {alone: list(range(40))}, SETTLED + 3) == {alone: []}


def test_connections_behind_a_proxy_are_left_alone(tmp_path):
    """uvicorn gives a proxied request the forwarded address with port 0,
    which many connections share: never asked to close."""
    import asyncio

    from wms.api.balance import ConnectionBalance

    clock = Clock()
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message):
        sent.append(message)

    over = Shares(tmp_path, "1", 2, clock)
    over.last_answer = lambda connection: True                      # a worker far over its share
    balance = ConnectionBalance(app, over)
    asyncio.run(balance({"type": "http", "client": ("192.0.2.7", 0)}, None, send))
    asyncio.run(balance({"type": "http", "client": ("192.0.2.7", 40123)}, None, send))
    assert sent[0]["headers"] == [] and sent[1]["headers"] == [(b"connection", b"close")]


def test_a_worker_holding_every_connection_gives_half_away_though_the_other_is_silent(tmp_path):
    """32/0: the idle worker answers nothing and so writes no count; its share counts all the same."""
    clock = Clock()
    busy = Shares(tmp_path, "1", 2, clock)
    closed = periods(clock, {busy: list(range(32))}, SETTLED)
    assert len(closed[busy]) == 16


def test_a_refused_connection_is_neither_counted_nor_closed(tmp_path):
    """A 429 or 503 sends its client away for seconds: it holds no connection
    here, so a crowd refused by a saturated worker does not make it look
    fuller, nor is a refusal the answer that closes a connection."""
    import asyncio

    from wms.api.balance import ConnectionBalance

    clock = Clock()
    sent = []
    statuses = iter([429, 503, 200])

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": next(statuses), "headers": []})

    async def send(message):
        sent.append(message)

    over = Shares(tmp_path, "1", 2, clock)
    noted = []
    over.last_answer = lambda connection: noted.append(connection) or True     # far over its share
    balance = ConnectionBalance(app, over)
    for port in (40001, 40002, 40003):
        asyncio.run(balance({"type": "http", "client": ("192.0.2.7", port)}, None, send))
    assert [m["headers"] for m in sent] == [[], [], [(b"connection", b"close")]]
    assert noted == [("192.0.2.7", 40003)]                          # only the answered one counts
