"""Durable tries: what a prepared try leaves for the next one, and when the next one may trust it.

With ``durable=True``, a driver whose task is gone while it waits for the decision (the worker was
lost after the write and its checks) keeps its staging instead of dropping it, with a
:class:`PreparedRecord` beside the data. The next try of the same transaction adopts that staging
instead of running the query again, if the record says the same query and settings produced it
(the digest) and the staging still carries the transaction's markers. The fence moves to the
adopting try in one step (one marker write or one property update); the publish checks it as for
any staging, so of two adopters only the newer one can publish. Only a live try ever decides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from airflow_provider_ctas.core.markers import json_object

RECORD_FILE = "_airflow_ctas_prepared.json"
"""Beside the staged data (a name Spark's readers skip, as they skip every ``_`` file)."""


def digest_of(sql: str, spec: Mapping[str, Any], checks: Sequence[Mapping[str, Any]], conf: Mapping[str, Any]) -> str:
    """What produced a staged version: the rendered query, the table's settings, the checks and the
    Spark settings the operator passes. A change in any of them means the staging is not adopted."""
    canonical = json.dumps(
        {"sql": sql.strip(), "spec": spec, "checks": list(checks), "conf": {str(k): str(v) for k, v in conf.items()}},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class PreparedRecord:
    """Written by the try that prepared the staging, rewritten by each try that adopts it."""

    txn_id: str
    digest: str
    prepared_by_try: int
    held_by_try: int
    """The try whose staging this is now: the writer, then each adopter in turn."""
    row_count: int
    mechanism: str
    columns: tuple[tuple[str, str], ...]
    registered: bool
    """Staging is a table (renamed into place, or swapped), not only a directory (flipped, switched in)."""
    prepared_at: str
    checks: tuple[dict[str, Any], ...] = ()
    checks_summary: str = ""

    def held_by(self, try_number: int) -> PreparedRecord:
        return PreparedRecord(**{**asdict(self), "held_by_try": try_number})

    def to_json(self) -> str:
        data = asdict(self)
        data["columns"] = [list(c) for c in self.columns]
        data["checks"] = list(self.checks)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def parse(cls, content: str | None) -> PreparedRecord | None:
        """The record in ``content``, or None when it is missing, garbled or incomplete."""
        data = json_object(content)
        if data is None:
            return None
        strings = ("txn_id", "digest", "mechanism", "prepared_at", "checks_summary")
        ints = ("prepared_by_try", "held_by_try", "row_count")
        if not all(isinstance(data.get(k), str) for k in strings):
            return None
        if not all(isinstance(data.get(k), int) and not isinstance(data.get(k), bool) for k in ints):
            return None
        columns, checks = data.get("columns"), data.get("checks")
        if not isinstance(data.get("registered"), bool) or not (isinstance(columns, list) and isinstance(checks, list)):
            return None
        if not all(isinstance(c, list) and len(c) == 2 and all(isinstance(p, str) for p in c) for c in columns):
            return None
        if not all(isinstance(c, dict) for c in checks):
            return None
        return cls(
            txn_id=data["txn_id"],
            digest=data["digest"],
            prepared_by_try=data["prepared_by_try"],
            held_by_try=data["held_by_try"],
            row_count=data["row_count"],
            mechanism=data["mechanism"],
            columns=tuple((c[0], c[1]) for c in columns),
            registered=data["registered"],
            prepared_at=data["prepared_at"],
            checks=tuple(checks),
            checks_summary=data["checks_summary"],
        )


@dataclass(frozen=True)
class Candidate:
    """A prepared staging found by begin: where it is, which try's name it has, and its record."""

    location: str
    name_try: int
    record: PreparedRecord


def adoptable(candidates: Iterable[Candidate], txn_id: str, try_number: int, digest: str) -> Candidate | None:
    """The staging the try ``try_number`` may adopt: this transaction's, held by an earlier try,
    produced by the same digest; the most recent holder when there are several."""
    fitting = [
        c
        for c in candidates
        if c.record.txn_id == txn_id
        and c.record.digest == digest
        and c.record.prepared_by_try <= c.record.held_by_try < try_number
        and c.name_try == c.record.prepared_by_try
    ]
    return max(fitting, key=lambda c: c.record.held_by_try, default=None)


def mismatch(record: PreparedRecord, *, mechanism: str, columns: Sequence[tuple[str, str]], registered: bool) -> str:
    """Why a digest-matching staging still does not fit this try's plan ('' when it does): the
    target changed between the tries (created, dropped, reshaped), so the publish differs."""
    if record.mechanism != mechanism:
        return f"it was staged for a {record.mechanism}, this try must {mechanism}"
    if tuple(record.columns) != tuple(columns):
        return "its columns differ from what the query now produces"
    if record.registered != registered:
        return "its staging is of another kind than this publish needs"
    return ""
