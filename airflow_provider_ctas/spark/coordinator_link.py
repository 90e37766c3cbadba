"""The driver's end of the commit handshake (``core/decision.py``).

The driver connects to its task before begin, and a watcher thread follows the task's heartbeats for
the whole run. When the task is gone (connection closed, heartbeats stopped for the lease), says
abort, or sends a message that does not verify, the watcher cancels the running Spark jobs at once,
so an orphaned driver stops writing within seconds; the phase loop then removes this try's staging
and exits. At commit the driver reports *prepared* and publishes only on the task's commit to that
report.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_ctas.core.channel import ChannelClosed, LineChannel
from airflow_provider_ctas.core.decision import Kind, Message, is_commit_for, new_nonce, seal, unseal
from airflow_provider_ctas.core.errors import CoordinatorLostError, CorruptStateError


class CoordinatorLink:
    def __init__(
        self, settings: Mapping[str, Any], txn_id: str, try_number: int, on_lost: Callable[[str], None]
    ) -> None:
        try:
            self.address = str(settings["address"])
            self.port = int(settings["port"])
            self.key = str(settings["key"])
            self.lease_seconds = float(settings["lease_seconds"])
            self.decision_seconds = float(settings["decision_seconds"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"the request's coordinator settings are unusable: {exc}") from exc
        self.txn_id, self.try_number = txn_id, try_number
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._answered = threading.Event()
        self._nonce = ""
        self._commit: Message | None = None
        self.lost: str | None = None
        self._channel: LineChannel | None = None
        self._closed = False

    def connect(self) -> None:
        try:
            sock = socket.create_connection((self.address, self.port), timeout=10)
        except OSError as exc:
            raise CoordinatorLostError(f"cannot reach the task at {self.address}:{self.port}: {exc}") from exc
        self._channel = LineChannel(sock)
        self._send(Message(Kind.HELLO, self.txn_id, self.try_number))
        threading.Thread(target=self._watch, name="airflow-ctas-coordinator-link", daemon=True).start()

    def _send(self, message: Message) -> None:
        assert self._channel is not None
        try:
            self._channel.send(seal(self.key, message))
        except ChannelClosed as exc:
            self._lose(f"the task's connection broke ({exc})")

    def _watch(self) -> None:
        assert self._channel is not None
        heard = time.monotonic()
        while not self._closed:
            try:
                line = self._channel.receive(1.0)
                if line is None:
                    if time.monotonic() - heard > self.lease_seconds:
                        self._lose(f"no heartbeat from the task for {self.lease_seconds:.0f}s")
                        return
                    continue
                message = unseal(self.key, line, txn_id=self.txn_id, try_number=self.try_number)
            except ChannelClosed as exc:
                self._lose(f"the task process is gone ({exc})")
                return
            except CoordinatorLostError as exc:
                self._lose(str(exc))
                return
            heard = time.monotonic()
            if message.kind is Kind.ABORT:
                self._lose("the task decided abort")
                return
            if message.kind is Kind.COMMIT:
                with self._lock:
                    if is_commit_for(message, self._nonce):
                        self._commit = message
                        self._answered.set()
                        continue
                self._lose("refused a commit that does not answer this driver's prepared report")
                return

    def _lose(self, reason: str) -> None:
        with self._lock:
            if self.lost is not None or self._commit is not None or self._closed:
                return
            self.lost = reason
            self._answered.set()
        self._on_lost(reason)

    def check(self) -> None:
        if self.lost is not None:
            raise CoordinatorLostError(f"not publishing: {self.lost}")

    def await_commit(self) -> float:
        """Block until the task answers this report; return the seconds it took, or raise."""
        started = time.monotonic()
        with self._lock:
            self._nonce = new_nonce()
        self._send(Message(Kind.PREPARED, self.txn_id, self.try_number, self._nonce))
        if not self._answered.wait(self.decision_seconds):
            self._lose(f"no decision from the task within {self.decision_seconds:.0f}s")
        if self._commit is None:
            self.check()
            raise CoordinatorLostError("not publishing: the task did not decide commit")
        return time.monotonic() - started

    def close(self) -> None:
        self._closed = True
        if self._channel is not None:
            self._channel.close()
