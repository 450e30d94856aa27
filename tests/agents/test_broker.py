"""The broker transport (agents/broker.py): a channel closed after its
transport lost its connection gives a connection error, which kombu's close
path ignores, instead of an AttributeError that stopped the worker; the
unacknowledged message stays in Redis to be restored later.

Real Redis (the spare database of test_celery.py); skipped without it,
failed under CI=true.
"""

from __future__ import annotations

import uuid

import pytest
import redis
from kombu import Connection
from kombu.common import ignore_errors

from agents.broker import TRANSPORT, transport_for
from tests.agents.conftest import REDIS_URL
from tests.helpers import patience


def test_the_transport_is_ours_for_redis_only():
    assert transport_for("redis://127.0.0.1:6379/0") == TRANSPORT
    assert transport_for("rediss://redis.example.org/0") is None
    assert transport_for("amqp://guest@localhost//") is None


def test_closing_a_detached_channel_with_an_unacknowledged_message(redis_client):
    name = f"wms-test-broker-{uuid.uuid4().hex[:8]}"
    connection = Connection(REDIS_URL, transport=TRANSPORT)
    queue = connection.SimpleQueue(name)
    queue.put({"run": "lease_reaper"})
    message = queue.get(timeout=patience(30))   # delivered, not acknowledged (a run in progress)
    assert message.payload == {"run": "lease_reaper"}
    # The state kombu can reach when the broker goes away: the transport
    # already detached from its connection when the channel is closed.
    connection.transport.client = None
    with pytest.raises(redis.exceptions.ConnectionError):
        connection.default_channel._connparams()
    ignore_errors(connection, connection.close)   # the worker's own call: must not raise
    assert redis_client.hexists("unacked", message.delivery_tag)   # kept, to be restored
    redis_client.hdel("unacked", message.delivery_tag)
    redis_client.zrem("unacked_index", message.delivery_tag)
    redis_client.delete(name)
