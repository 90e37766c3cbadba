"""The task's end of the commit handshake (``core/decision.py``): the live task decides the commit.

The spark-submit driver connects to this listener (127.0.0.1: a client-mode driver runs on the
worker, as a child of the task process), reports *prepared* and publishes only when this process
answers *commit*. The listener lives in the task process itself, so the answer cannot come from
anywhere else: when the task process dies (SIGKILL, OOM killer, lost worker) the kernel closes the
connection and the driver removes its staging and exits instead of publishing. Heartbeats let the
driver also notice a task that is frozen rather than dead.

In cluster deploy mode the driver runs on a cluster node, which need not reach the worker: there the
driver listens, and this process connects to it (``connect``) once it has learned where from the
cluster (``runners/yarn_driver.py``). The conversation is the same; the driver also sends its
result on it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from airflow_provider_ctas.core.channel import ChannelClosed, LineChannel
from airflow_provider_ctas.core.decision import Kind, Message, new_key, seal, unseal
from airflow_provider_ctas.core.errors import CoordinatorLostError
from airflow_provider_ctas.core.faults import inject

HELLO_SECONDS = 10.0


class CommitCoordinator:
    """Answers one driver's *prepared* with commit, unless this try was told to stop first."""

    def __init__(
        self,
        txn_id: str,
        try_number: int,
        log: Any,
        *,
        heartbeat_seconds: float = 2.0,
        lease_seconds: float = 30.0,
        decision_seconds: float = 60.0,
        accept_seconds: float = 300.0,
        driver_listens: bool = False,
        faults: Mapping[str, Any] | None = None,
    ) -> None:
        self.txn_id, self.try_number, self.log = txn_id, try_number, log
        self.faults = dict(faults or {})
        self.heartbeat_seconds = heartbeat_seconds
        self.lease_seconds = lease_seconds
        self.decision_seconds = decision_seconds
        self.accept_seconds = accept_seconds
        self.driver_listens = driver_listens
        self.result: str | None = None
        """The driver's result, where it sent it on the channel (it listens)."""
        self.key = new_key()
        self.decision: Kind | None = None
        self.refusal = ""
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server: socket.socket | None = None
        self._channel: LineChannel | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def __enter__(self) -> CommitCoordinator:
        if self.driver_listens:
            return self
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(1.0)
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="airflow-ctas-coordinator", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.close()
        if self._channel is not None:
            self._channel.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def settings(self) -> dict[str, Any]:
        """What the driver needs, sent in the request file (mode 0600); never stored in XCom."""
        common = {"key": self.key, "lease_seconds": self.lease_seconds, "decision_seconds": self.decision_seconds}
        if self.driver_listens:
            return {**common, "driver_listens": True, "accept_seconds": self.accept_seconds}
        return {**common, "address": "127.0.0.1", "port": self.port}

    def connect(self, host: str, port: int) -> None:
        """Opens the channel to a driver that listens at ``host:port``; raises OSError when it cannot
        be reached, CoordinatorLostError when what answers is not this try's driver."""
        channel = LineChannel(socket.create_connection((host, port), timeout=10))
        channel.send(self._message(Kind.HELLO))
        if not self._greeted(channel):
            channel.close()
            raise CoordinatorLostError(f"{host}:{port} did not answer as this try's driver")
        self._channel = channel
        if self.decision is Kind.ABORT:
            self._send(Kind.ABORT)
        self._thread = threading.Thread(
            target=self._converse, args=(channel,), name="airflow-ctas-coordinator", daemon=True
        )
        self._thread.start()

    def refuse(self, reason: str) -> None:
        """From now on the answer is abort (on_kill, timeout); a commit already sent stands."""
        with self._lock:
            if self.decision is None:
                self.decision, self.refusal = Kind.ABORT, reason
                self._send(Kind.ABORT)

    def _message(self, kind: Kind, nonce: str = "") -> bytes:
        return seal(self.key, Message(kind, self.txn_id, self.try_number, nonce))

    def _send(self, kind: Kind, nonce: str = "") -> None:
        channel = self._channel
        if channel is not None:
            with contextlib.suppress(ChannelClosed):
                channel.send(self._message(kind, nonce))

    def _serve(self) -> None:
        assert self._server is not None
        while not self._stopped.is_set():
            try:
                sock, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            channel = LineChannel(sock)
            if self._greeted(channel):
                self._channel = channel
                if self.decision is Kind.ABORT:
                    self._send(Kind.ABORT)
                self._converse(channel)
                return
            channel.close()

    def _greeted(self, channel: LineChannel) -> bool:
        """Only this try's driver says hello with this key; anything else is dropped."""
        try:
            line = channel.receive(HELLO_SECONDS)
            return (
                line is not None
                and unseal(self.key, line, txn_id=self.txn_id, try_number=self.try_number).kind is Kind.HELLO
            )
        except (ChannelClosed, CoordinatorLostError) as exc:
            self.log.warning("[airflow-ctas] coordinator: dropped a connection that is not this try's driver (%s)", exc)
            return False

    def _converse(self, channel: LineChannel) -> None:
        next_beat = 0.0
        while not self._stopped.is_set():
            now = time.monotonic()
            if now >= next_beat:
                self._send(Kind.HEARTBEAT)
                next_beat = now + self.heartbeat_seconds
            try:
                line = channel.receive(max(0.05, next_beat - time.monotonic()))
                if line is None:
                    continue
                message = unseal(self.key, line, txn_id=self.txn_id, try_number=self.try_number)
            except ChannelClosed:
                return
            except CoordinatorLostError as exc:
                self.log.warning("[airflow-ctas] coordinator: %s; answering abort", exc)
                self.refuse(str(exc))
                continue
            if message.kind is Kind.PREPARED:
                inject(self.faults, "before_decision", self.try_number, self.log.info)
                self._decide(message.nonce)
            elif message.kind is Kind.RESULT and self.driver_listens:
                self.result = message.payload

    def _decide(self, nonce: str) -> None:
        with self._lock:
            if self.decision is None:
                self.decision = Kind.COMMIT
            self._send(self.decision, nonce if self.decision is Kind.COMMIT else "")
        if self.decision is Kind.COMMIT:
            self.log.info("[airflow-ctas] commit: the task decided commit for try %s", self.try_number)
        else:
            self.log.info("[airflow-ctas] commit: refused for try %s (%s)", self.try_number, self.refusal)
