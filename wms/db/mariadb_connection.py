"""PyMySQL's connection without the COMMIT and ROLLBACK that cannot change anything.

PyMySQL sends every ``commit()`` and ``rollback()`` to the server, even
when no transaction is open. SQLAlchemy calls both more often than a
transaction needs: ``engine.begin()`` commits, then the pool rolls the
connection back as it takes it in (it does not know the commit ended
everything). On MariaDB that was a third round trip for each claim of
the Matcher, after the claim's CALL and COMMIT. psycopg asks its own
connection state and skips such calls; this connection does the same,
from what it knows for certain:

- after a COMMIT or ROLLBACK that succeeded, and nothing sent since, no
  transaction is open (unless the server chained a new one, which its
  status flag then says);
- after a stored routine that ended with COMMIT (``routine_committed``),
  the same, once the server's last status confirms it.

The server's "in transaction" flag alone is not enough: after a plain
SELECT with autocommit off it stays clear, yet the transaction holds the
table's metadata lock until COMMIT or ROLLBACK (measured on MariaDB 10.11:
an ALTER TABLE waits for it). So any statement sent makes the next
COMMIT or ROLLBACK go to the server.
"""

from __future__ import annotations

from typing import Any

import pymysql.connections
from pymysql.constants import SERVER_STATUS

_IN_TRANSACTION = SERVER_STATUS.SERVER_STATUS_IN_TRANS


class TransactionAwareConnection(pymysql.connections.Connection):
    """A PyMySQL connection that knows when it has no transaction to end."""

    # True only while nothing has been sent since the last transaction ended.
    _ended = False

    def _execute_command(self, command: int, sql: Any) -> None:
        self._ended = False
        super()._execute_command(command, sql)

    def commit(self) -> None:
        if not self._ended:
            super().commit()
            self._ended = self._no_transaction_open()

    def rollback(self) -> None:
        if not self._ended:
            super().rollback()
            self._ended = self._no_transaction_open()

    def routine_committed(self) -> None:
        """The statement just completed was a stored routine whose last act
        was COMMIT: the next COMMIT or ROLLBACK has nothing to end, if the
        server's final status agrees and every result has been read."""
        self._ended = self._no_transaction_open() and not (self._result is not None and self._result.has_next)

    def _no_transaction_open(self) -> bool:
        return not (self.server_status or 0) & _IN_TRANSACTION
