"""The Redis broker transport of the agents' Celery app: kombu's own, with
one failure on broker loss turned into what it is, a connection error.

When Redis goes away while a worker holds an unacknowledged message (late
acknowledgement: every agent run in progress), the consumer closes its
channel, and closing requeues the unacknowledged messages. kombu may find
the channel's transport already detached from its connection by then
(``transport.client`` is None); asking it for the connection parameters
raised AttributeError, which none of the callers expects: the worker
logged "Unrecoverable error" and exited, and with it every agent, until
someone restarted it (seen in tests/e2e/test_distributed.py, which kills
Redis mid-run).

Raising redis's ConnectionError instead lets kombu treat it like any other
lost connection: the channel close ignores it and the consumer reconnects.
Nothing is lost by not requeueing at that moment: the message stays in
Redis's unacknowledged set, from which kombu restores it after the
visibility timeout, and a Redis that restarted empty had nothing to
restore; the agents are idempotent and the beat sends the next run anyway.
"""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError("the broker connection is already closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"


def transport_for(broker_url: str) -> str | None:
    """Our transport for a plain ``redis://`` broker URL; None (kombu's choice) for anything else."""
    return TRANSPORT if broker_url.startswith("redis://") else None
