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


def run_in_transaction(
    engine: Engine, work: Callable[[Connection], T], attempts: int = ATTEMPTS, *, single_statement: bool = False,
    on_retry: Callable[[], object] | None = None,
) -> T:
    """Run ``work(conn)`` in a transaction; retry it whole on a retryable error.

    ``single_statement``: ``work`` runs ONE statement, which is its own
    transaction on an autocommit connection; this saves the BEGIN and
    COMMIT round trips (the Matcher's one-call claim).
    ``on_retry`` is called before each new attempt (the metrics count them).
    """
    for attempt in range(1, attempts + 1):
        try:
            if single_statement:
                with engine.connect() as conn:
                    return work(conn.execution_options(isolation_level="AUTOCOMMIT"))
            with engine.begin() as conn:
                return work(conn)
        except DBAPIError as exc:
            if attempt == attempts or not is_retryable(exc):
                raise
            # Back off a little, with jitter, so colliding writers separate.
            if on_retry is not None:
                on_retry()
            time.sleep(random.uniform(0, 0.01 * 2**attempt))
    raise AssertionError("unreachable")
