"""One transaction, retried when the database reports a transient conflict
(deadlock, serialization failure, SQLite busy). Services own transactions;
routers and agents never commit.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from wms.db.engine import is_retryable

T = TypeVar("T")

ATTEMPTS = 5


def run_in_transaction(engine: Engine, work: Callable[[Connection], T], attempts: int = ATTEMPTS) -> T:
    """Run ``work(conn)`` in a transaction; retry it whole on a retryable error."""
    for attempt in range(1, attempts + 1):
        try:
            with engine.begin() as conn:
                return work(conn)
        except DBAPIError as exc:
            if attempt == attempts or not is_retryable(exc):
                raise
            # Back off a little, with jitter, so colliding writers separate.
            time.sleep(random.uniform(0, 0.01 * 2**attempt))
    raise AssertionError("unreachable")
