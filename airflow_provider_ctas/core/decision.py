"""The commit handshake between the Airflow task (the coordinator) and the Spark driver.

FLIP-305's rule: the job only prepares; the job-status hook decides commit or abort. Here the task
process is that hook. The driver reports *prepared* and publishes only when the task process of the
same try answers *commit* to that very report; a garbled, replayed or foreign message, silence, or
a closed connection all mean abort.

Messages are JSON lines sealed with an HMAC-SHA256 under a per-submission key, which travels to the
driver in the request file (mode 0600, deleted after the run) and never over the wire or into
XCom. Each message names the transaction and try; the decision echoes the nonce of the *prepared*
report it answers, so an old decision cannot be replayed against a new report.

Either side may open the connection: the driver connects to the task where it runs beside it
(client mode); in cluster deploy mode the task connects to the driver, both then say hello, and
the driver sends its result over the channel too (it cannot write a file on the worker).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_provider_ctas.core.errors import CoordinatorLostError

MAX_LINE = 1 << 20
"""Longest message either side reads (a result with its details); anything longer is garbage."""


class Kind(StrEnum):
    HELLO = "hello"  # either way: connected, for this transaction and try (the connecting side first)
    PREPARED = "prepared"  # driver -> task: staging complete; may I publish? (carries a nonce)
    HEARTBEAT = "heartbeat"  # task -> driver: still alive
    COMMIT = "commit"  # task -> driver: publish (echoes the nonce)
    ABORT = "abort"  # task -> driver: do not publish
    RESULT = "result"  # driver -> task, where the task connected: the run's result (its payload)


@dataclass(frozen=True)
class Message:
    kind: Kind
    txn_id: str
    try_number: int
    nonce: str = ""
    payload: str = ""


def new_key() -> str:
    return secrets.token_hex(32)


def new_nonce() -> str:
    return secrets.token_hex(16)


def _mac(key: str, body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(bytes.fromhex(key), canonical, hashlib.sha256).hexdigest()


def seal(key: str, message: Message) -> bytes:
    body = {
        "kind": message.kind.value,
        "txn": message.txn_id,
        "try": message.try_number,
        "nonce": message.nonce,
        "payload": message.payload,
    }
    return (json.dumps({**body, "mac": _mac(key, body)}, sort_keys=True) + "\n").encode()


def unseal(key: str, line: bytes, *, txn_id: str, try_number: int) -> Message:
    """The message in ``line`` if it is authentic and about this transaction and try; raises otherwise."""
    if len(line) > MAX_LINE:
        raise CoordinatorLostError("refused a message longer than the protocol allows")
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise CoordinatorLostError("refused a message that is not JSON") from exc
    if not isinstance(data, dict) or set(data) != {"kind", "txn", "try", "nonce", "payload", "mac"}:
        raise CoordinatorLostError("refused a message with unexpected fields")
    mac = data.pop("mac")
    if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(key, data)):
        raise CoordinatorLostError("refused a message whose seal does not verify (not from this try's peer)")
    if data["txn"] != txn_id or data["try"] != try_number or type(data["try"]) is not int:
        raise CoordinatorLostError(
            f"refused a message for transaction {data['txn']!r} try {data['try']!r}; this is {txn_id} try {try_number}"
        )
    try:
        kind = Kind(data["kind"])
    except ValueError as exc:
        raise CoordinatorLostError(f"refused a message of unknown kind {data['kind']!r}") from exc
    if not isinstance(data["nonce"], str) or not isinstance(data["payload"], str):
        raise CoordinatorLostError("refused a message whose nonce or payload is not a string")
    if data["payload"] and kind is not Kind.RESULT:
        raise CoordinatorLostError(f"refused a {kind} message that carries a payload")
    return Message(kind, txn_id, try_number, data["nonce"], data["payload"])


def is_commit_for(message: Message, nonce: str) -> bool:
    """Whether ``message`` is the commit answering the *prepared* report that carried ``nonce``."""
    return message.kind is Kind.COMMIT and bool(nonce) and hmac.compare_digest(message.nonce, nonce)


ANNOUNCEMENT = "decision channel: listening on port {port} for transaction {txn_id} try {try_number}"
"""What a driver that waits for its task prints (to its log, which the cluster serves): no secret,
only where to connect; the hello that follows is sealed."""


def announced_port(log_text: str, *, txn_id: str, try_number: int) -> int | None:
    """The port this try's driver announced in ``log_text``, if it did."""
    pattern = ANNOUNCEMENT.format(port=r"(\d{1,5})", txn_id=re.escape(txn_id), try_number=try_number)
    match = re.search(pattern + r"(?!\d)", log_text)
    if match is None or not 0 < int(match.group(1)) < 65536:
        return None
    return int(match.group(1))
