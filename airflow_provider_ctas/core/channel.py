"""Newline-framed messages over a TCP socket, for the commit handshake (stdlib only: both the Airflow
worker and the Spark driver's Python use it)."""

from __future__ import annotations

import contextlib
import socket
import threading

from airflow_provider_ctas.core.decision import MAX_LINE


class ChannelClosed(Exception):
    """The peer closed the connection, or it broke."""


class LineChannel:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._send_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError as exc:
                raise ChannelClosed(str(exc)) from exc

    def receive(self, timeout: float) -> bytes | None:
        """The next line, or None when none arrived within ``timeout`` seconds."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE + 8192:
                raise ChannelClosed("peer sent an overlong line")
            try:
                self._sock.settimeout(timeout)
                chunk = self._sock.recv(8192)
            except TimeoutError:
                return None
            except OSError as exc:
                raise ChannelClosed(str(exc)) from exc
            if not chunk:
                raise ChannelClosed("peer closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
