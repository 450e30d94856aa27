"""The match lane (wms/api/lane.py): blocking calls from the event loop on
a few threads of their own, at most N at once, answers and errors carried
back, the caller's context kept, nothing left behind."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time

import pytest

from wms.api.lane import Lane

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def lane_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}-")]


def test_a_call_answers_on_a_thread_of_the_lane():
    lane = Lane(2, "answers")

    async def main():
        return await lane.run(lambda a, b: (a + b, threading.current_thread().name), 2, 3)

    total, thread = asyncio.run(main())
    assert total == 5 and thread.startswith("answers-")


def test_an_error_is_raised_to_the_caller_and_the_lane_goes_on():
    lane = Lane(1, "errors")

    def fails():
        raise KeyError("no such job")

    async def main():
        with pytest.raises(KeyError, match="no such job"):
            await lane.run(fails)
        return await lane.run(lambda: "still serving")

    assert asyncio.run(main()) == "still serving"


def test_no_more_calls_run_at_once_than_the_lane_has_threads():
    lane = Lane(2, "bound")
    running = 0
    most = 0
    lock = threading.Lock()

    def work(k: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return k

    async def main():
        return await asyncio.gather(*(lane.run(work, k) for k in range(12)))

    assert asyncio.run(main()) == list(range(12))
    assert most == 2


def test_the_call_sees_the_callers_context():
    lane = Lane(2, "context")

    async def one(rid: str) -> str | None:
        request_id.set(rid)
        return await lane.run(request_id.get)

    async def main():
        return await asyncio.gather(*(one(f"r{k}") for k in range(6)))

    assert asyncio.run(main()) == [f"r{k}" for k in range(6)]


def test_a_caller_that_gives_up_leaves_the_call_to_finish_and_the_lane_free():
    lane = Lane(1, "gives-up")
    finished = threading.Event()

    def slow():
        time.sleep(0.2)
        finished.set()
        return "late"

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lane.run(slow), 0.05)
        assert await lane.run(lambda: "next") == "next"

    asyncio.run(main())
    assert finished.is_set()


def test_the_threads_start_with_the_first_call_and_end_with_the_lane():
    lane = Lane(3, "lifetime")
    assert lane_threads("lifetime") == []
    asyncio.run(lane.run(lambda: None))
    assert len(lane_threads("lifetime")) == 3
    del lane
    gc.collect()
    deadline = time.monotonic() + 5
    while lane_threads("lifetime") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lane_threads("lifetime") == []


def test_a_lane_needs_a_thread():
    with pytest.raises(ValueError, match="at least one thread"):
        Lane(0, "none")
