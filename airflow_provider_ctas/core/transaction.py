"""The two-phase table: a serializable transaction handle, after Flink's FLIP-305 ``TwoPhaseCatalogTable``.

The object lives on the coordinator side (the Airflow task, its callbacks, the DAG processor) and
travels as JSON through XCom and the task state store. Its methods are pure state transitions;
the catalog work of each phase runs in a Spark process that receives the serialized object.

A transaction is one task instance (dag_id, task_id, run_id, map_index); its id is derived from
those, so every try, callback and garbage-collection pass finds the same staging objects. The try
number that began the current attempt is the fence: an older try cannot move the state back.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.details import Details, received
from airflow_provider_ctas.core.errors import CorruptStateError, FencedError, InvalidTransitionError
from airflow_provider_ctas.core.identifiers import TableRef, validate_target

SCHEMA_VERSION = 1
MAX_HISTORY = 50
_CONN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,250}")


class TxnState(StrEnum):
    NEW = "new"
    BEGUN = "begun"
    PREPARED = "prepared"
    COMMITTED = "committed"
    ABORTED = "aborted"


class Outcome(StrEnum):
    PUBLISHED = "published"
    """This try published the target."""
    ALREADY_PUBLISHED = "already_published"
    """An earlier try of the same transaction had published the target; nothing was re-run."""
    TARGET_EXISTS = "target_exists"
    """``create_if_not_exists`` found a target and left it alone."""
    ABORTED = "aborted"


@dataclass(frozen=True)
class TransactionKey:
    """The Airflow task instance a transaction belongs to."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1

    @property
    def txn_id(self) -> str:
        canonical = json.dumps([self.dag_id, self.task_id, self.run_id, self.map_index], separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "map_index": self.map_index,
        }

    @classmethod
    def from_dict(cls, data: object) -> TransactionKey:
        fields_ = _exact_fields(data, {"dag_id", "task_id", "run_id", "map_index"}, "key")
        for name in ("dag_id", "task_id", "run_id"):
            if not isinstance(fields_[name], str) or not fields_[name]:
                raise CorruptStateError(f"key.{name} must be a non-empty string")
        map_index = fields_["map_index"]
        if not isinstance(map_index, int) or isinstance(map_index, bool) or map_index < -1:
            raise CorruptStateError("key.map_index must be an integer >= -1")
        return cls(fields_["dag_id"], fields_["task_id"], fields_["run_id"], map_index)


@dataclass(frozen=True)
class HistoryEntry:
    try_number: int
    state: TxnState
    at: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"try_number": self.try_number, "state": self.state.value, "at": self.at, "note": self.note}

    @classmethod
    def from_dict(cls, data: object) -> HistoryEntry:
        fields_ = _exact_fields(data, {"try_number", "state", "at", "note"}, "history entry")
        return cls(
            try_number=_int(fields_["try_number"], "history.try_number"),
            state=_state(fields_["state"]),
            at=_str(fields_["at"], "history.at"),
            note=_str(fields_["note"], "history.note", allow_empty=True),
        )


def validate_conn_id(conn_id: object) -> str:
    if not isinstance(conn_id, str) or not _CONN_ID.fullmatch(conn_id):
        raise CorruptStateError(f"conn_id {conn_id!r} is not a valid Airflow connection id")
    return conn_id


T = TypeVar("T", bound="TwoPhaseTable")


@dataclass(kw_only=True)
class TwoPhaseTable:
    """State and identity of one atomic table creation; subclasses add what their catalog needs.

    Lifecycle (per try): ``begin`` -> ``mark_prepared`` -> ``commit``, or ``abort`` from any
    non-committed state. ``begin`` of a later try restarts an aborted or crashed attempt.
    """

    kind: ClassVar[str] = ""
    format_name: ClassVar[str] = ""
    """How errors name the kind of table ("Iceberg", "Delta")."""

    key: TransactionKey
    conn_id: str
    target: TableRef
    try_number: int = 0
    state: TxnState = TxnState.NEW
    outcome: Outcome | None = None
    last_committed_try: int | None = None
    details: Details = field(default_factory=Details)
    history: list[HistoryEntry] = field(default_factory=list)

    @property
    def txn_id(self) -> str:
        return self.key.txn_id

    @property
    def replaces_partitions(self) -> bool:
        """Whether a publish replaces only the partitions a try wrote, keeping the table's others."""
        return False

    # -- lifecycle ---------------------------------------------------------------------------

    def begin(self, try_number: int, at: str) -> None:
        """Start ``try_number``; a later try may restart anything but an older one never can."""
        if try_number < 1:
            raise InvalidTransitionError(f"try_number must be >= 1, got {try_number}")
        if try_number < self.try_number:
            raise FencedError(
                f"try {try_number} of transaction {self.txn_id} cannot begin: try {self.try_number} has already begun"
            )
        if try_number == self.try_number:
            if self.state is TxnState.BEGUN:
                return
            raise InvalidTransitionError(f"try {try_number} already began and is now {self.state.value}")
        note = ""
        if self.state is TxnState.COMMITTED:
            note = f"after try {self.try_number} committed"
        elif self.state in (TxnState.BEGUN, TxnState.PREPARED):
            note = f"try {self.try_number} ended without commit or abort"
        self.try_number = try_number
        self.state = TxnState.BEGUN
        self.outcome = None
        self.details = {}
        self._record(at, note)

    def continue_from(self, prior: TwoPhaseTable) -> None:
        """Carry the lifecycle recorded by earlier tries into this freshly built table.

        The spec (target settings) comes from the current DAG code; what happened so far comes
        from the durable record.
        """
        if prior.kind != self.kind or prior.txn_id != self.txn_id:
            raise CorruptStateError(
                f"stored state belongs to {prior.kind} transaction {prior.txn_id}, not {self.txn_id}"
            )
        self.try_number = prior.try_number
        self.state = prior.state
        self.outcome = prior.outcome
        self.last_committed_try = prior.last_committed_try
        self.details = prior.details.copy()
        self.history = list(prior.history)

    def mark_prepared(self, try_number: int, at: str, details: Details | None = None) -> None:
        self._require_current(try_number, "prepare")
        if self.state is TxnState.PREPARED:
            return
        if self.state is not TxnState.BEGUN:
            raise InvalidTransitionError(f"cannot prepare: transaction is {self.state.value}")
        self.state = TxnState.PREPARED
        self.details.update(details or {})
        self._record(at)

    def commit(self, try_number: int, at: str, outcome: Outcome, details: Details | None = None) -> bool:
        """Record the publish; False when this try had already committed (idempotent)."""
        self._require_current(try_number, "commit")
        if self.state is TxnState.COMMITTED:
            return False
        if self.state not in (TxnState.BEGUN, TxnState.PREPARED):
            raise InvalidTransitionError(f"cannot commit: transaction is {self.state.value}")
        if outcome is Outcome.ABORTED:
            raise InvalidTransitionError("commit needs a publish outcome, not 'aborted'")
        self.state = TxnState.COMMITTED
        self.outcome = outcome
        self.last_committed_try = try_number
        self.details.update(details or {})
        self._record(at, outcome.value)
        return True

    def finalize(self, try_number: int, at: str) -> bool:
        """Confirm a commit after Airflow recorded success; False if already confirmed."""
        self._require_current(try_number, "finalize")
        if self.state is not TxnState.COMMITTED:
            raise InvalidTransitionError(
                f"cannot finalize: transaction is {self.state.value}, the target was not published"
            )
        if self.details.get("finalized_at"):
            return False
        self.details["finalized_at"] = at
        return True

    def abort(self, try_number: int, at: str, details: Details | None = None) -> bool:
        """Record an abort; False when there was nothing to abort (already aborted or committed)."""
        self._require_current(try_number, "abort")
        if self.state in (TxnState.ABORTED, TxnState.COMMITTED):
            return False
        self.state = TxnState.ABORTED
        self.outcome = Outcome.ABORTED
        self.details.update(details or {})
        self._record(at)
        return True

    def _require_current(self, try_number: int, action: str) -> None:
        if try_number != self.try_number:
            raise FencedError(
                f"try {try_number} cannot {action} transaction {self.txn_id}: the current try is {self.try_number}"
            )

    def _record(self, at: str, note: str = "") -> None:
        self.history.append(HistoryEntry(self.try_number, self.state, at, note))
        del self.history[:-MAX_HISTORY]

    # -- serialization -----------------------------------------------------------------------

    def marker_properties(self, *, created_at: str, provider_version: str) -> dict[str, str]:
        """Ownership markers and provenance: written with what this try stages, they survive its publish."""
        return {
            markers.TXN_ID: self.txn_id,
            markers.TRY_NUMBER: str(self.try_number),
            markers.TARGET: self.target.qualified,
            markers.DAG_ID: self.key.dag_id,
            markers.TASK_ID: self.key.task_id,
            markers.RUN_ID: self.key.run_id,
            markers.MAP_INDEX: str(self.key.map_index),
            markers.PROVIDER_VERSION: provider_version,
            markers.CREATED_AT: created_at,
        }

    @classmethod
    def parse_target(cls, text: object) -> TableRef:
        """The target as this kind names it (the session catalog unless a kind says otherwise)."""
        return validate_target(text)

    def spec_to_dict(self) -> dict[str, Any]:
        """Kind-specific settings; every value must round-trip through JSON."""
        return {}

    @classmethod
    def spec_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate kind-specific settings and return them as constructor keyword arguments."""
        _exact_fields(data, set(), "spec")
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "txn_id": self.txn_id,
            "key": self.key.to_dict(),
            "conn_id": self.conn_id,
            "target": self.target.qualified,
            "try_number": self.try_number,
            "state": self.state.value,
            "outcome": self.outcome.value if self.outcome else None,
            "last_committed_try": self.last_committed_try,
            "details": json.loads(json.dumps(self.details)),
            "history": [entry.to_dict() for entry in self.history],
            "spec": self.spec_to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def _from_validated(cls: type[T], data: Mapping[str, Any]) -> T:
        key = TransactionKey.from_dict(data["key"])
        if data["txn_id"] != key.txn_id:
            raise CorruptStateError(
                f"txn_id {data['txn_id']!r} does not match its key (expected {key.txn_id}); the state was altered"
            )
        outcome = data["outcome"]
        if outcome is not None and outcome not in Outcome._value2member_map_:
            raise CorruptStateError(f"unknown outcome {outcome!r}")
        details = data["details"]
        if not isinstance(details, dict) or not all(isinstance(k, str) for k in details):
            raise CorruptStateError("details must be an object")
        history = data["history"]
        if not isinstance(history, list):
            raise CorruptStateError("history must be a list")
        last_committed = data["last_committed_try"]
        spec = data["spec"]
        if not isinstance(spec, Mapping):
            raise CorruptStateError("spec must be an object")
        try:
            target = cls.parse_target(data["target"])
        except ValueError as exc:
            raise CorruptStateError(f"target is invalid: {exc}") from exc
        return cls(
            key=key,
            conn_id=validate_conn_id(data["conn_id"]),
            target=target,
            try_number=_int(data["try_number"], "try_number"),
            state=_state(data["state"]),
            outcome=Outcome(outcome) if outcome else None,
            last_committed_try=None if last_committed is None else _int(last_committed, "last_committed_try"),
            details=received(details),
            history=[HistoryEntry.from_dict(entry) for entry in history],
            **cls.spec_from_dict(spec),
        )


_COMMON_FIELDS = {
    "schema_version",
    "kind",
    "txn_id",
    "key",
    "conn_id",
    "target",
    "try_number",
    "state",
    "outcome",
    "last_committed_try",
    "details",
    "history",
    "spec",
}

_KINDS: dict[str, type[TwoPhaseTable]] = {}


def register_kind(cls: type[T]) -> type[T]:
    """Add a two-phase table class to the allowlist that deserialization dispatches on."""
    if not cls.kind or (cls.kind in _KINDS and _KINDS[cls.kind] is not cls):
        raise ValueError(f"kind {cls.kind!r} is empty or already registered")
    _KINDS[cls.kind] = cls
    return cls


def registered_kinds() -> tuple[str, ...]:
    return tuple(sorted(_KINDS))


def load_table(data: object) -> TwoPhaseTable:
    """Rebuild a two-phase table from its JSON form, failing closed on anything unexpected.

    The class is looked up in the registry by ``kind``; nothing named in the data is imported.
    """
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise CorruptStateError(f"transaction state is not JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise CorruptStateError(f"transaction state must be a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CorruptStateError("transaction state has no integer schema_version")
    if version > SCHEMA_VERSION:
        raise CorruptStateError(
            f"transaction state has schema_version {version}, newer than this provider understands "
            f"({SCHEMA_VERSION}); upgrade airflow-provider-ctas on this machine"
        )
    if version < 1:
        raise CorruptStateError(f"schema_version {version} is not valid")
    kind = data.get("kind")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise CorruptStateError(
            f"transaction state has unknown kind {kind!r}; known kinds: {', '.join(registered_kinds())}"
        )
    _exact_fields(data, _COMMON_FIELDS, "transaction state")
    return cls._from_validated(data)


def _exact_fields(data: object, expected: set[str], what: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise CorruptStateError(f"{what} must be an object")
    keys = set(data)
    if keys != expected:
        missing, extra = sorted(expected - keys), sorted(keys - expected)
        raise CorruptStateError(f"{what} has missing fields {missing} / unexpected fields {extra}")
    return dict(data)


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CorruptStateError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def _str(value: object, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise CorruptStateError(f"{what} must be a string")
    return value


def _state(value: object) -> TxnState:
    if not isinstance(value, str) or value not in TxnState._value2member_map_:
        raise CorruptStateError(f"unknown state {value!r}")
    return TxnState(value)
