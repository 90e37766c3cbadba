"""A TCP proxy in front of a service that fails on demand, for faults a real service cannot be made
to have: a request the service applied whose answer never reaches the client (the connection
closes, or a gateway answers 503 instead), and a service that refuses new connections.

It runs in the test's process (a thread per direction of each connection) and forwards bytes as
they come. The faults are one-shot and armed by the test: ``lose_answer(pattern)`` lets the next
request whose bytes match (an HTTP request line: ``^POST /path``; a Thrift call: its method name or
an argument) reach the service, waits for the service's answer, and then
closes the client's connection without it (``mode="close"``) or answers ``503`` in its place
(``mode="503"``, as a gateway does; Iceberg 1.11's REST client does not send a commit again after it).
``unavailable()`` answers HTTP requests ``503`` without forwarding them, as an object store that is
down does, on connections the client already holds as well as on new ones; ``throttle(n)`` answers
only the next ``n`` so, as a store that throttles and then recovers does. ``down()`` makes the
service look killed: its open connections are reset and new ones refused (its port is closed) until
``down(False)`` opens the same port again, with the service's state intact, as a restarted endpoint.

Seeing every request, it also counts the calls a Thrift client makes (``calls``, by method name):
how many metastore calls a publish costs, on the wire, where the service receives them.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

SERVICE_UNAVAILABLE = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
LOSE_MODES = ("close", "503")
# A strict binary-protocol Thrift call: version 1 and type CALL, then the method name's length and the name.
THRIFT_CALL = re.compile(rb"\x80\x01\x00\x01\x00\x00\x00([\x01-\x7f])")


@dataclass
class _Armed:
    pattern: re.Pattern[bytes]
    mode: str


@dataclass
class FaultProxy:
    target: tuple[str, int]
    host: str = "127.0.0.1"
    lost: list[str] = field(default_factory=list)
    """The request lines whose answers were lost, in order."""
    refused: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    """Thrift calls forwarded to the service, by method name."""
    on_call: Callable[[str], None] | None = None
    """Called with each Thrift call's method name as it is forwarded (in the proxy's thread)."""
    call_seconds: dict[str, float] = field(default_factory=dict)
    """Per Thrift method, the seconds from forwarding a call's first bytes to its answer's first
    bytes: how long the service took with it, as its client waited."""
    unavailable_answers: int = 0
    """HTTP requests answered 503 by ``unavailable()`` or ``throttle()``, not forwarded."""
    connections: int = 0
    """Client connections accepted and forwarded."""
    _armed: _Armed | None = None
    _refusing: bool = False
    _unavailable: bool = False
    _throttled: int = 0
    _down_port: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket | None = None
    _live: set[_Connection] = field(default_factory=set)

    @property
    def port(self) -> int:
        if self._down_port is not None:
            return self._down_port
        assert self._listener is not None, "start() first"
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, port: int = 0) -> FaultProxy:
        self._listener = socket.create_server((self.host, port))
        threading.Thread(target=self._accept, args=(self._listener,), name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the accepting thread; close() alone would not
                self._listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._listener.close()

    def lose_answer(self, request: str, mode: str = "close") -> None:
        """The answer to the next request whose first chunk matches ``request`` (a regex) is lost."""
        if mode not in LOSE_MODES:
            raise ValueError(f"mode must be one of {LOSE_MODES}, not {mode!r}")
        with self._lock:
            self._armed = _Armed(re.compile(request.encode()), mode)

    def refuse(self, refusing: bool = True) -> None:
        """New connections are closed at once while ``refusing`` (the service looks down)."""
        self._refusing = refusing

    def down(self, down: bool = True) -> None:
        """While ``down``, connecting is refused and every open connection is reset (RST), as when
        the service's process is killed; back up, the proxy listens on the same port again."""
        if down:
            port = self.port
            self.stop()
            self._down_port = port
            with self._lock:
                live = list(self._live)
            for connection in live:
                connection.reset()
            return
        was, self._down_port = self._down_port, None
        if was is None:
            return
        deadline = time.monotonic() + 10
        while True:  # the port is ours again unless some client's socket took it meanwhile (rare)
            try:
                self.start(was)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def unavailable(self, down: bool = True) -> None:
        """Every HTTP request is answered ``503`` while ``down``, without reaching the service."""
        self._unavailable = down

    def throttle(self, requests: int) -> None:
        """The next ``requests`` HTTP requests are answered ``503``; the ones after reach the service."""
        with self._lock:
            self._throttled = requests

    def _unavailable_now(self) -> bool:
        with self._lock:
            refused = self._unavailable or self._throttled > 0
            if refused:
                self.unavailable_answers += 1
                self._throttled = max(self._throttled - 1, 0)
            return refused

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._refusing:
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self.connections += 1
            connection = _Connection(self, client, upstream)
            with self._lock:
                self._live.add(connection)
            connection.start()

    def _count(self, chunk: bytes) -> list[str]:
        names = []
        for found in THRIFT_CALL.finditer(chunk):
            length = found.group(1)[0]
            raw = chunk[found.end() : found.end() + length]
            if len(raw) == length and raw.isascii() and raw.replace(b"_", b"").isalnum():
                names.append(raw.decode())
        with self._lock:
            self.calls.update(names)
        for method in names:
            if self.on_call is not None:
                self.on_call(method)
        return names

    def _answered(self, method: str, seconds: float) -> None:
        with self._lock:
            self.call_seconds[method] = self.call_seconds.get(method, 0.0) + seconds

    def _claim(self, chunk: bytes) -> str | None:
        """The loss mode when ``chunk`` is the armed request (disarming it), else None."""
        with self._lock:
            armed = self._armed
            found = armed.pattern.search(chunk) if armed is not None else None
            if armed is None or found is None:
                return None
            self._armed = None
            line = chunk.split(b"\r\n", 1)[0] if chunk[:1].isalpha() else found.group(0)
            self.lost.append(line.decode(errors="replace"))
            return armed.mode


class _Connection:
    def __init__(self, proxy: FaultProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.losing: str | None = None
        self.waiting: tuple[str, float] | None = None
        """The Thrift call forwarded last and when, until its answer starts (a connection's calls take turns)."""

    def start(self) -> None:
        threading.Thread(target=self._requests, daemon=True).start()
        threading.Thread(target=self._answers, daemon=True).start()

    def _requests(self) -> None:
        try:
            while data := self.client.recv(65536):
                if data[:1].isalpha() and self.proxy._unavailable_now():  # a request line: answered here
                    self.client.sendall(SERVICE_UNAVAILABLE)
                    break
                if names := self.proxy._count(data):
                    self.waiting = (names[-1], time.monotonic())
                if self.losing is None:
                    self.losing = self.proxy._claim(data)
                self.upstream.sendall(data)
        except OSError:
            pass
        self._close()

    def _answers(self) -> None:
        try:
            while data := self.upstream.recv(65536):
                if self.waiting is not None:
                    method, since = self.waiting
                    self.waiting = None
                    self.proxy._answered(method, time.monotonic() - since)
                if self.losing is not None:
                    # The service answered: it has applied the request. Its answer goes nowhere.
                    if self.losing == "503":
                        self.client.sendall(SERVICE_UNAVAILABLE)
                    break
                self.client.sendall(data)
        except OSError:
            pass
        self._close()

    def reset(self) -> None:
        """Close the client's side with an RST (SO_LINGER 0), as a killed service's kernel does."""
        with contextlib.suppress(OSError):
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._close()

    def _close(self) -> None:
        with self.proxy._lock:
            self.proxy._live.discard(self)
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
