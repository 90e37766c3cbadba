"""Ownership markers and reserved names.

Abort and garbage collection delete only what carries this provider's markers: table properties
set in the same ``CREATE TABLE`` that creates a staging table, and a marker file written into each
staging directory before any data. A reserved name alone is never proof of ownership.

Markers survive ``ALTER TABLE ... RENAME``, so a published table carries them too; they double as
provenance (who published this table, from which run and try, when).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from airflow_provider_ctas.core.identifiers import PROVIDER_PROPERTY_PREFIX, RESERVED_PREFIX

TXN_ID = PROVIDER_PROPERTY_PREFIX + "txn_id"
TRY_NUMBER = PROVIDER_PROPERTY_PREFIX + "try_number"
TARGET = PROVIDER_PROPERTY_PREFIX + "target"
DAG_ID = PROVIDER_PROPERTY_PREFIX + "dag_id"
TASK_ID = PROVIDER_PROPERTY_PREFIX + "task_id"
RUN_ID = PROVIDER_PROPERTY_PREFIX + "run_id"
MAP_INDEX = PROVIDER_PROPERTY_PREFIX + "map_index"
PROVIDER_VERSION = PROVIDER_PROPERTY_PREFIX + "provider_version"
CREATED_AT = PROVIDER_PROPERTY_PREFIX + "created_at"
PUBLISHED_AT = PROVIDER_PROPERTY_PREFIX + "published_at"
ROW_COUNT = PROVIDER_PROPERTY_PREFIX + "row_count"
CHECKS = PROVIDER_PROPERTY_PREFIX + "checks"
# Set on a target just before this transaction moves it aside during a swap.
SUPERSEDED_BY = PROVIDER_PROPERTY_PREFIX + "superseded_by"
SUPERSEDED_TARGET = PROVIDER_PROPERTY_PREFIX + "superseded_target"
SUPERSEDED_AT = PROVIDER_PROPERTY_PREFIX + "superseded_at"
SUPERSEDED_KEYS = (SUPERSEDED_BY, SUPERSEDED_TARGET, SUPERSEDED_AT)

MARKER_FILE = "_airflow_ctas.json"
SUPERSEDED_FILE = "_airflow_ctas_superseded.json"

Role = Literal["staging", "backup", "claim"]
_ROLE_CODES: dict[str, Role] = {"s": "staging", "b": "backup", "c": "claim"}
_RESERVED = re.compile(rf"{RESERVED_PREFIX}([0-9a-f]{{16}})_([sbc])([0-9]+)")


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 time from a marker (naive means UTC), or None when it is unreadable."""
    try:
        parsed = datetime.fromisoformat(text or "")
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def txn_tag(txn_id: str) -> str:
    """The part of a transaction id that appears in reserved names (names are length-limited)."""
    return txn_id[:16]


def staging_name(txn_id: str, try_number: int) -> str:
    return f"{RESERVED_PREFIX}{txn_tag(txn_id)}_s{try_number}"


def backup_name(txn_id: str, try_number: int) -> str:
    return f"{RESERVED_PREFIX}{txn_tag(txn_id)}_b{try_number}"


def claim_name(target: str) -> str:
    """The name a rename into ``target`` (qualified, as its marker has it) is claimed under while it
    runs: derived from the target, so every creator of it contends for the same one (the tag is not
    a transaction's)."""
    return f"{RESERVED_PREFIX}{hashlib.sha256(target.lower().encode()).hexdigest()[:16]}_c0"


def is_claim(properties: Mapping[str, str], name: str) -> bool:
    """Whether the view ``name`` is this provider's claim: its markers name a target it is the claim
    name of."""
    target = properties.get(TARGET)
    return bool(target and properties.get(TXN_ID) and claim_name(target) == name.lower())


def name_pattern(txn_id: str | None = None) -> str:
    """A ``SHOW TABLES ... LIKE`` pattern for the reserved names of one or all transactions."""
    return f"{RESERVED_PREFIX}{txn_tag(txn_id) if txn_id else ''}*"


@dataclass(frozen=True)
class ReservedName:
    tag: str
    role: Role
    try_number: int


def parse_reserved_name(name: str) -> ReservedName | None:
    match = _RESERVED.fullmatch(name.lower())
    if not match:
        return None
    return ReservedName(tag=match.group(1), role=_ROLE_CODES[match.group(2)], try_number=int(match.group(3)))


def newer_staging(names: Iterable[str], txn_id: str, try_number: int) -> list[str]:
    """The staging names (tables or directories) among ``names`` of tries of ``txn_id`` after
    ``try_number``: a newer try that has begun in the catalog."""
    found = []
    for name in names:
        parsed = parse_reserved_name(name)
        if parsed and parsed.role == "staging" and parsed.tag == txn_tag(txn_id) and parsed.try_number > try_number:
            found.append(name)
    return sorted(found)


def marker_try(properties: Mapping[str, str]) -> int | None:
    raw = properties.get(TRY_NUMBER)
    return int(raw) if raw is not None and raw.isdigit() else None


def task_of(properties: Mapping[str, str]) -> dict[str, str | None]:
    """The task instance the markers name (what GC asks Airflow about before removing anything)."""
    return {"dag_id": properties.get(DAG_ID), "task_id": properties.get(TASK_ID), "run_id": properties.get(RUN_ID)}


def owned_by(properties: Mapping[str, str], txn_id: str, *, up_to_try: int | None = None) -> bool:
    """True when the properties say this transaction (optionally: a try <= ``up_to_try``) made it."""
    if properties.get(TXN_ID) != txn_id:
        return False
    if up_to_try is None:
        return True
    found = marker_try(properties)
    return found is not None and found <= up_to_try


def superseded_by_value(txn_id: str, try_number: int) -> str:
    return f"{txn_id}:{try_number}"


@dataclass(frozen=True)
class MarkerFile:
    """The ownership marker written into every directory this provider creates, before any data.

    ``published_at`` is added once the directory became a target's data, so garbage collection can
    tell a superseded published version from staging that never got published.
    """

    txn_id: str
    try_number: int
    target: str
    created_at: str
    task: dict[str, object] = field(default_factory=dict)
    """dag_id, task_id, run_id and map_index of the task instance, so GC can ask Airflow about it."""
    published_at: str | None = None
    retained: tuple[Retained, ...] = ()
    """Versions this directory's publish (or an earlier one it inherited them from) superseded and keeps
    for readers until their time is up; the next publish that supersedes this directory deletes them."""
    revoked_by: int | None = None
    """The newer try of the same transaction that fenced this (unregistered) staging directory: its
    try may no longer publish it. The marker stays, so recovery and GC still know whose it is."""

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "retained": [asdict(r) for r in self.retained]}, sort_keys=True)

    @classmethod
    def parse(cls, content: str | None) -> MarkerFile | None:
        """The marker in ``content``, or None when it is missing or not one of ours."""
        data = json_object(content)
        if data is None:
            return None
        txn_id, try_number, target = data.get("txn_id"), data.get("try_number"), data.get("target")
        created_at, published_at, task = data.get("created_at"), data.get("published_at"), data.get("task")
        if not (isinstance(txn_id, str) and isinstance(try_number, int) and isinstance(target, str)):
            return None
        retained, revoked_by = data.get("retained"), data.get("revoked_by")
        return cls(
            txn_id,
            try_number,
            target,
            created_at if isinstance(created_at, str) else "",
            task if isinstance(task, dict) else {},
            published_at if isinstance(published_at, str) else None,
            tuple(
                Retained(entry["path"], entry["delete_after"])
                for entry in (retained if isinstance(retained, list) else [])
                if isinstance(entry, dict)
                and isinstance(entry.get("path"), str)
                and isinstance(entry.get("delete_after"), str)
            ),
            revoked_by if isinstance(revoked_by, int) else None,
        )


@dataclass(frozen=True)
class Retained:
    """A superseded version kept for readers whose file listing predates the switch."""

    path: str
    delete_after: str


@dataclass(frozen=True)
class SupersededRecord:
    """Written into a version's directory when a newer version replaced it.

    Spark sessions that listed its files before the switch (a Thrift server, a BI tool's session,
    any reader that does not ``REFRESH TABLE``) keep reading them until ``delete_after``; then the
    next publish over the same data, or GC, deletes the directory. Its presence is also the proof
    that this provider retired the directory, which deletion requires.
    """

    target: str
    superseded_at: str
    delete_after: str
    superseded_by: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, content: str | None) -> SupersededRecord | None:
        data = json_object(content)
        if data is None:
            return None
        values = [data.get(k) for k in ("target", "superseded_at", "delete_after", "superseded_by")]
        strings = [v for v in values if isinstance(v, str)]
        return cls(*strings) if len(strings) == len(values) else None


def json_object(content: str | None) -> dict[str, Any] | None:
    """A marker file's JSON object, or None for a missing, garbled or non-object file."""
    try:
        data = json.loads(content or "")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
