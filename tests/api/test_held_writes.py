"""A response's head and body go to the socket in one write (wms/api/writes.py),
on a real transport over a real socket pair; and a real `wms server`
answers whole through it."""

from __future__ import annotations

import asyncio
import http.client
import socket

from tests.servers import running_server
from wms.api.writes import HOLD_MAX, HeldWrites


async def _transport_pair() -> tuple[asyncio.Transport, socket.socket]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    theirs.setblocking(False)
    return transport, theirs


async def _received(peer: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    got = b""
    while len(got) < size:
        got += await asyncio.wait_for(loop.sock_recv(peer, 1 << 20), 5)
    return got


def run(scenario) -> object:
    async def body():
        transport, peer = await _transport_pair()
        sent: list[bytes] = []
        real_write = transport.write

        def counted(data):                      # the real transport's write, counted
            sent.append(bytes(data))
            real_write(data)

        transport.write = counted               # type: ignore[method-assign]
        held = HeldWrites(transport, asyncio.get_running_loop())
        try:
            return await scenario(held, peer, sent)
        finally:
            transport.abort()
            peer.close()
    return asyncio.run(body())


def test_a_head_and_a_body_written_in_one_turn_go_out_as_one_write():
    async def scenario(held, peer, sent):
        held.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        held.write(b"{}")
        assert sent == []                       # held until the end of the turn
        got = await _received(peer, 40)
        return sent, got
    sent, got = run(scenario)
    assert len(sent) == 1 and got == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"


def test_a_large_body_goes_at_once_with_what_was_held_before_it():
    body = b"x" * (HOLD_MAX + 1)

    async def scenario(held, peer, sent):
        held.write(b"head\r\n\r\n")
        held.write(body)
        assert sent == [b"head\r\n\r\n" + body]  # not delayed to the end of the turn
        return await _received(peer, len(body) + 8)
    assert run(scenario) == b"head\r\n\r\n" + body


def test_close_sends_what_is_held_first_and_abort_drops_it():
    async def scenario(held, peer, sent):
        held.write(b"last words")
        held.close()
        got = await _received(peer, 10)
        return sent, got
    sent, got = run(scenario)
    assert sent == [b"last words"] and got == b"last words"

    async def aborted(held, peer, sent):
        held.write(b"never")
        held.abort()
        await asyncio.sleep(0)
        return sent
    assert run(aborted) == []


def test_a_real_server_answers_whole_request_after_request_on_one_connection(tmp_path):
    with running_server(tmp_path) as server:
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        for _ in range(3):
            connection.request("GET", "/api/v1/health")
            answer = connection.getresponse()
            assert answer.status == 200 and answer.read().startswith(b"{")
        connection.close()
