"""Real network cuts between pilots and the server, for the lease tests.

Each pilot runs in a network namespace of its own, joined to the server's
side by a veth pair the test makes (``Link``); ``Link.cut()`` takes the
server's end down (``ip link set DEV down``), so the pilot's packets are
lost, not refused, as on a cut cable. Between the links and the server sits
``Forwarder``, a small TCP forwarder in the test process: this kernel has no
netem, so it is what delays, jitters and loses (for TCP: a segment that
must be sent again arrives late, and now and then a connection is reset),
and it can drop the answer to one pilot's Running report and cut that
pilot's link at that moment. Everything is removed at the end, whatever the
outcome.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field

from tests.e2e.processes import missing_service


def netns_problem() -> str | None:
    """Why the namespace tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "network namespaces and veth pairs need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    probe = f"wmsprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def require_netns() -> None:
    problem = netns_problem()
    if problem:
        missing_service(problem)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


# Addresses of this process's links: 10.<octet>.<index>.0/30, the octet from
# the pid so that two test runs on one machine do not meet.
_OCTET = 100 + os.getpid() % 100


@dataclass
class Link:
    """A namespace for one pilot and the veth pair that joins it to the server's side."""

    index: int
    namespace: str = ""
    device: str = ""
    made: bool = False

    def __post_init__(self) -> None:
        tag = f"{os.getpid() % 100000}x{self.index}"
        self.namespace = f"wmsl-{tag}"
        self.device = f"wl{tag}"          # at most 15 characters (IFNAMSIZ)

    @property
    def server_address(self) -> str:
        return f"10.{_OCTET}.{self.index}.1"

    @property
    def pilot_address(self) -> str:
        return f"10.{_OCTET}.{self.index}.2"

    def make(self) -> Link:
        peer = self.device + "p"
        ip("netns", "add", self.namespace)
        self.made = True
        ip("link", "add", self.device, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", self.namespace)
        ip("addr", "add", f"{self.server_address}/30", "dev", self.device)
        ip("link", "set", self.device, "up")
        ip("-n", self.namespace, "addr", "add", f"{self.pilot_address}/30", "dev", peer)
        ip("-n", self.namespace, "link", "set", peer, "up")
        ip("-n", self.namespace, "link", "set", "lo", "up")
        return self

    def cut(self) -> None:
        ip("link", "set", self.device, "down")

    def heal(self) -> None:
        ip("link", "set", self.device, "up")

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this link's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def remove(self) -> None:
        if not self.made:
            return
        subprocess.run(["ip", "link", "del", self.device], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True)
        self.made = False


@dataclass
class Weather:
    """What the forwarder does to every chunk of bytes: ``delay`` seconds plus
    or minus ``jitter``, in order; with probability ``loss`` the chunk is lost
    once (TCP sends it again: it arrives ``resend`` seconds later), and one
    loss in ``reset_share`` resets the connection instead."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    resend: tuple[float, float] = (0.2, 0.6)
    reset_share: float = 0.2


# How a request begins: a pilot keeps its connection and sends many on it.
REQUEST_STARTS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"PATCH ", b"HEAD ")


class _Reset(Exception):
    """The forwarder resets this connection (a loss TCP did not recover from)."""


@dataclass
class Forwarder:
    """Accepts on ``port`` (every address of the server's side) and forwards to ``target``."""

    target: tuple[str, int]
    weather: Weather = field(default_factory=Weather)
    port: int = 0
    # pilot address -> (the link to cut, how long; None: for good) when its Running report's answer comes back.
    lose_running_answer: dict[str, tuple[Link, float | None]] = field(default_factory=dict)
    answers_lost: list[str] = field(default_factory=list)
    # While closed, each Running report waits at the gate before it reaches the server
    # (the pilot has claimed its job, the job is Matched, nothing has started).
    gate: threading.Event = field(default_factory=threading.Event)
    reports_at_gate: int = 0
    reports_through_gate: int = 0
    resets: int = 0
    delayed: int = 0
    # The first this many connections are reset as soon as they are accepted
    # (a peer that drops a handshake under load).
    refuse_first: int = 0
    accepted: int = 0       # connections accepted, refused ones included

    def close_gate(self) -> None:
        self.gate.clear()

    def open_gate(self) -> None:
        self.gate.set()

    def start(self) -> Forwarder:
        self._listener = socket.create_server(("0.0.0.0", self.port), backlog=128, reuse_port=False)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._rng = random.Random(1)
        self._lock = threading.Lock()
        self.gate.set()
        threading.Thread(target=self._accept, name="forwarder", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, (address, _) = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.refuse_first > 0:
                self.refuse_first -= 1
                self.resets += 1
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            state = {"running_report": False}
            threading.Thread(target=self._pump, args=(client, server, address, state, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, address, state, False), daemon=True).start()

    def _chance(self) -> float:
        with self._lock:
            return self._rng.random()

    def _delay(self) -> float:
        w = self.weather
        delay = max(0.0, w.delay + (2 * self._chance() - 1) * w.jitter)
        if w.loss and self._chance() < w.loss:
            if self._chance() < w.reset_share:
                raise _Reset()
            self.delayed += 1
            delay += w.resend[0] + self._chance() * (w.resend[1] - w.resend[0])
        return delay

    def _pump(self, source: socket.socket, sink: socket.socket, address: str, state: dict, upstream: bool) -> None:
        seen = b""
        due = 0.0
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    break
                if upstream and chunk.startswith(REQUEST_STARTS):
                    # The next request on a kept-alive connection: judged afresh.
                    seen, state["running_report"] = b"", False
                if upstream and not state["running_report"]:
                    seen = (seen + chunk)[-65536:]
                    state["running_report"] = b"/pilot-status" in seen and b'"Running"' in seen
                    if state["running_report"] and not self.gate.is_set():
                        with self._lock:
                            self.reports_at_gate += 1
                        self.gate.wait()
                        with self._lock:
                            self.reports_through_gate += 1
                if not upstream and state["running_report"] and address in self.lose_running_answer:
                    # The report reached the server and was recorded; its answer is lost with the link.
                    link, down_for = self.lose_running_answer.pop(address)
                    self.answers_lost.append(address)
                    link.cut()
                    if down_for is not None:
                        threading.Timer(down_for, link.heal).start()
                    break
                due = max(due, time.monotonic() + self._delay())
                time.sleep(max(0.0, due - time.monotonic()))
                sink.sendall(chunk)
        except _Reset:
            self.resets += 1
            for sock in (source, sink):
                try:       # SO_LINGER 0: close sends a reset
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
