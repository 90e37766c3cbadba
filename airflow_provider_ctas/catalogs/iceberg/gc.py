"""Garbage collection in an Iceberg catalog: what a try left when neither its abort nor a later
try of its task instance ran (a worker lost, retries exhausted after a kill).

Per namespace it finds staging tables under reserved names that carry their markers, and on every
other table the fences (``fence.py``) with the branches of their transaction. A staging table goes
with its files; a transaction's fences go with its branches in one metadata swap that happens only
if no newer try raised a fence meanwhile. The snapshots of a dropped branch are then unreferenced,
and Iceberg's own snapshot expiry deletes their files. Age is the newest try's begin time recorded
in its fence; a branch without a fence is kept, since a running try's branch cannot be told apart
from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.gc_ledger import GcLedger, GcParams
from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.table import BRANCH_PREFIX, branch_try
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.identifiers import TableRef, validate_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.spark.engine import Reporter


class IcebergGc:
    def __init__(self, spark: SparkSession, settings: dict[str, Any], log: Reporter) -> None:
        self.catalog_name = validate_name(settings.pop("catalog", None), "catalog")
        self.params = GcParams.from_dict(settings)
        self.ledger = GcLedger(self.params, log)
        self.catalog = IcebergCatalog(spark, self.catalog_name)

    def run(self) -> dict[str, Any]:
        for database in self.params.databases:
            if not self.catalog.namespace_exists(database):
                self.ledger.note("kept", f"{self.catalog_name}.{database}", "namespace does not exist")
                continue
            for name in self.catalog.table_names(database):
                ref = TableRef(database, name, self.catalog_name)
                parsed = markers.parse_reserved_name(name)
                if parsed is not None and parsed.role == "staging":
                    self._staging(ref, parsed)
                else:
                    self._fences(ref)
        return self.ledger.report()

    def _staging(self, ref: TableRef, parsed: markers.ReservedName) -> None:
        what = ref.qualified
        current = self.catalog.current(ref)
        if current is None:
            return
        props = md.properties(current)
        due = self.ledger.owner_if_due(what, props, ownership.is_staging_named(props, parsed))
        if due is None:
            return
        txn_id, task = due
        problem = None if self.params.dry_run else self.catalog.drop(ref)
        if problem is not None:
            self.ledger.note("kept", problem, "the staging table's directory, after the table was dropped")
        self.ledger.note("removed", what, "orphan staging table (with its directory)", txn_id=txn_id, task=task)

    def _fences(self, ref: TableRef) -> None:
        table = self.catalog.load(ref)
        if table is None:
            return
        current = table.operations().refresh()
        props = md.properties(current)
        fenced = fence.all_fences(props)
        for txn_id, raised in sorted(fenced.items()):
            try_number = max(raised)
            begun = fence.began(props, txn_id, try_number)  # unreadable: kept
            what = f"{ref.qualified} (fence of try {try_number} and branches of transaction {txn_id})"
            if self.ledger.blocked(what, txn_id, begun.get("begun_at"), begun.get("task") or {}):
                continue
            removed = self._clear(table, txn_id, try_number)
            if removed is None:
                self.ledger.note("kept", what, "a newer try of its task instance began meanwhile", txn_id=txn_id)
            else:
                why = f"a try that never finished (branches {', '.join(removed) or 'none'})"
                self.ledger.note("removed", what, why, txn_id=txn_id, task=begun.get("task") or {})
        tags = {markers.txn_tag(txn_id) for txn_id in fenced}
        for name in md.refs(current):
            if name.startswith(BRANCH_PREFIX) and not any(name.startswith(f"{BRANCH_PREFIX}{tag}_t") for tag in tags):
                self.ledger.note("kept", f"{ref.qualified} (branch {name})", "no fence records when its try began")

    def _clear(self, table: Any, txn_id: str, try_number: int) -> list[str] | None:
        """Drop the transaction's fences and branches in one swap, if ``try_number`` is still the
        newest try that began; the branch names, or None when a newer one began."""
        removed: list[str] = []
        changed = True

        def clear(base: Any, builder: Any) -> Any | None:
            nonlocal changed
            props = md.properties(base)
            if fence.newest(props, txn_id) != try_number:
                changed = False
                return None
            removed[:] = [name for name in md.refs(base) if branch_try(name, txn_id) is not None]
            if self.params.dry_run:
                return None
            for name in removed:
                builder = builder.removeRef(name)
            return builder.removeProperties(self.catalog.java_set(fence.keys_of(props, txn_id)))

        self.catalog.commit(table, clear)
        return removed if changed else None
