"""A few threads of their own for the pilots' job requests: blocking calls
made from the event loop with as little hand-over as Python allows.

Each request of a pilot runs the Matcher, which blocks on the database,
so it leaves the event loop for a thread. anyio's ``to_thread.run_sync``
does that through a ``queue.Queue``, whose hand-over is a condition
variable written in Python, a capacity limiter and a bookkeeping of idle
workers. In a profile of one server worker at 32 pilots (py-spy, holders
of the interpreter lock) the hand-over there and back was about a sixth
of the samples, more than the claim's own SQL statement. A lane is N
threads taking calls from a ``queue.SimpleQueue`` (in C: a put wakes one
waiting thread directly) and posting each answer back with
``call_soon_threadsafe``, which uvloop folds into one wake-up of the loop
however many answers are waiting.

What it keeps from anyio: at most N calls run at once, the others wait
in line (first come, first served); the caller's context variables (the
request id the log lines carry) are those of the call; a caller that
gives up (its client went away) leaves the call to finish, its answer
dropped. The threads start with the first call and end when the lane is
collected, so an app built and dropped by a test leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Call = tuple[contextvars.Context, Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, asyncio.Future]


class Lane:
    """``await lane.run(fn, *args)``: ``fn(*args)`` on one of ``threads`` threads."""

    def __init__(self, threads: int, name: str) -> None:
        if threads < 1:
            raise ValueError("a lane needs at least one thread")
        self.size = threads
        self.name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._started = False
        self._start_lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._started:
            self._start()
        self._calls.put((contextvars.copy_context(), fn, args, loop, future))
        return await future

    def _start(self) -> None:
        with self._start_lock:
            if self._started:
                return
            for k in range(self.size):
                threading.Thread(target=_serve, args=(self._calls,), name=f"{self.name}-{k}", daemon=True).start()
            # The threads hold the queue, not the lane: once the lane is
            # collected, this tells them to end.
            weakref.finalize(self, _stop, self._calls, self.size)
            self._started = True


def _serve(calls: queue.SimpleQueue) -> None:
    while True:
        call = calls.get()
        if call is None:
            return
        context, fn, args, loop, future = call
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - the caller raises it
            _answer(loop, future, None, exc)
        else:
            _answer(loop, future, result, None)
        del call, context, fn, args, loop, future


def _answer(loop: asyncio.AbstractEventLoop, future: asyncio.Future, result: Any,
            exc: BaseException | None) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, result, exc)
    except RuntimeError:
        pass          # the loop has closed: nobody waits for the answer any more


def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _stop(calls: queue.SimpleQueue, threads: int) -> None:
    for _ in range(threads):
        calls.put(None)
