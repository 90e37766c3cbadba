"""The driver's end of the commit handshake (``core/decision.py``).

The driver connects to its task before begin (client mode), or, in cluster deploy mode, listens and
announces its port in its log for the task to connect to; either way nothing is written before the
task is on the line, and a watcher thread follows the task's heartbeats for the whole run. When
the task is gone (connection closed, heartbeats stopped for the lease), says abort, or sends a
message that does not verify, the watcher cancels the running Spark jobs at once, so an orphaned
driver stops writing within seconds; the phase loop then removes this try's staging and exits. At
commit the driver reports *prepared* and publishes only on the task's commit to that report.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_ctas.core.channel import ChannelClosed, LineChannel
from airflow_provider_ctas.core.decision import ANNOUNCEMENT, Kind, Message, is_commit_for, new_nonce, seal, unseal
from airflow_provider_ctas.core.errors import CoordinatorLostError, CorruptStateError


class CoordinatorLink:
    def __init__(
        self,
        settings: Mapping[str, Any],
        txn_id: str,
        try_number: int,
        on_lost: Callable[[str], None],
        *,
        durable: bool = False,
    ) -> None:
        try:
            self.listens = settings.get("driver_listens") is True
            self.accept_seconds = float(settings["accept_seconds"]) if self.listens else 0.0
            self.address = "" if self.listens else str(settings["address"])
            self.port = 0 if self.listens else int(settings["port"])
            self.key = str(settings["key"])
            self.lease_seconds = float(settings["lease_seconds"])
            self.decision_seconds = float(settings["decision_seconds"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"the request's coordinator settings are unusable: {exc}") from exc
        self.txn_id, self.try_number = txn_id, try_number
        self.writes_on_for_next_try = durable and self.listens
        """Durable tries in cluster mode: a driver whose task is lost (not one told to abort) finishes
        its write and keeps it for the next try; it needs nothing of the worker to do so."""
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._answered = threading.Event()
        self._nonce = ""
        self._commit: Message | None = None
        self.lost: str | None = None
        self.aborted = False
        """The task said abort (it is alive and decided), as opposed to the task being lost."""
        self._channel: LineChannel | None = None
        self._closed = False

    def connect(self, announce: Callable[[str], None]) -> None:
        """Opens the channel to the task: connects to it, or listens for it (``announce`` says where)."""
        if self.listens:
            self._channel = self._accept(announce)
        else:
            try:
                sock = socket.create_connection((self.address, self.port), timeout=10)
            except OSError as exc:
                raise CoordinatorLostError(f"cannot reach the task at {self.address}:{self.port}: {exc}") from exc
            self._channel = LineChannel(sock)
        self._send(Message(Kind.HELLO, self.txn_id, self.try_number))
        threading.Thread(target=self._watch, name="airflow-ctas-coordinator-link", daemon=True).start()

    def _accept(self, announce: Callable[[str], None]) -> LineChannel:
        """The first connection whose hello verifies; others are dropped. On every interface: the
        task connects from the worker."""
        with socket.create_server(("", 0)) as server:
            port = server.getsockname()[1]
            announce(ANNOUNCEMENT.format(port=port, txn_id=self.txn_id, try_number=self.try_number))
            deadline = time.monotonic() + self.accept_seconds
            while (left := deadline - time.monotonic()) > 0:
                server.settimeout(left)
                try:
                    sock, _ = server.accept()
                except TimeoutError:
                    break
                channel = LineChannel(sock)
                try:
                    line = channel.receive(min(10.0, self.accept_seconds))
                    if line is not None:
                        hello = unseal(self.key, line, txn_id=self.txn_id, try_number=self.try_number)
                        if hello.kind is Kind.HELLO:
                            return channel
                except (ChannelClosed, CoordinatorLostError):
                    pass
                channel.close()
        raise CoordinatorLostError(
            f"the task did not connect within {self.accept_seconds:.0f}s: the decision path needs the Airflow "
            f"worker to reach this driver's host on port {port}"
        )

    def send_result(self, text: str) -> None:
        """Where the task connected, the run's result goes back on the channel (no shared file)."""
        if self.listens and self._channel is not None:
            self._send(Message(Kind.RESULT, self.txn_id, self.try_number, payload=text))

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
                self.aborted = True
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

    @property
    def writing_on(self) -> bool:
        """The task is lost and this driver goes on writing for the next try (never publishing)."""
        return self.writes_on_for_next_try and self.lost is not None and not self.aborted

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
