"""Durable tries on a replaced Iceberg table: a try whose task is lost while it waits for the
decision keeps its branch, with a record in the table's properties (``prepared.<txn>.<try>``:
``core.durable.PreparedRecord`` plus the branch's snapshot and the ``main`` it began from); the
next try adopts it in one metadata swap that re-creates the branch under its own name at the same
snapshot, drops the old one, and moves the fence and the record to itself. The swap is checked on
the metadata it replaces (no newer try began, the branch still at the recorded snapshot, ``main``
unmoved), so of two adopters one wins and the other builds its own branch or is fenced. A new
table (a staging table renamed at publish) is not kept: its try runs its query again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.core.durable import Candidate, PreparedRecord, adoptable
from airflow_provider_ctas.core.markers import json_object


@dataclass(frozen=True)
class KeptBranch:
    record: PreparedRecord
    snapshot_id: int
    base_snapshot_id: int

    def to_json(self) -> str:
        return json.dumps(
            {"record": json.loads(self.record.to_json()), "snapshot_id": self.snapshot_id,
             "base_snapshot_id": self.base_snapshot_id},
            sort_keys=True,
        )  # fmt: skip

    def held_by(self, try_number: int) -> KeptBranch:
        return KeptBranch(self.record.held_by(try_number), self.snapshot_id, self.base_snapshot_id)

    @classmethod
    def parse(cls, text: str | None) -> KeptBranch | None:
        data = json_object(text)
        if data is None:
            return None
        record = PreparedRecord.parse(json.dumps(data.get("record")))
        snapshot, base = data.get("snapshot_id"), data.get("base_snapshot_id")
        if record is None or not isinstance(snapshot, int) or not isinstance(base, int):
            return None
        return cls(record, snapshot, base)


def candidate(props: dict[str, str], txn_id: str, try_number: int, digest: str) -> KeptBranch | None:
    """The kept branch try ``try_number`` may adopt (same transaction and digest, held by an
    earlier try: the latest holder), or None."""
    kept = {n: k for n, text in fence.prepared(props, txn_id).items() if (k := KeptBranch.parse(text)) is not None}
    found = [
        Candidate(location=str(n), name_try=k.record.prepared_by_try, record=k.record)
        for n, k in kept.items()
        if k.record.held_by_try == n
    ]
    chosen = adoptable(found, txn_id, try_number, digest)
    return None if chosen is None else kept[int(chosen.location)]


class NotAdoptable(Exception):
    """The kept branch changed between the look and the swap: this try stages its own."""


def columns_of(schema: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(f.name), str(f.dataType.simpleString())) for f in schema.fields)
