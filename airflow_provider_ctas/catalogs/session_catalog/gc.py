"""Garbage collection of what no callback cleaned up: a worker SIGKILLed, a node lost, a run deleted.

Runs inside a Spark driver, database by database. It finds candidates by reserved name and by
marker file, and removes only what this provider's markers say it created, what is older than
``min_age``, whose transaction is not protected (running, as far as Airflow knows) and that no
table reads from. Everything else is reported with the reason it was kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.gc_ledger import GcLedger, GcParams
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient, TableInfo, now_iso
from airflow_provider_ctas.catalogs.metastore.name_claim import name_claimed
from airflow_provider_ctas.catalogs.session_catalog.plan import on_object_store
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.durable import RECORD_FILE, PreparedRecord
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.catalogs.strategy import StagingReader
    from airflow_provider_ctas.spark.engine import Reporter


class SessionCatalogGc:
    def __init__(
        self, spark: SparkSession, params: GcParams, log: Reporter, staging_readers: Sequence[StagingReader] = ()
    ) -> None:
        self.staging_readers = tuple(staging_readers)
        self.catalog = CatalogClient(spark)
        self.params = params
        self.ledger = GcLedger(params, log)
        self.log = log
        self._readers: dict[str, dict[str, list[str]]] = {}

    def run(self) -> dict[str, Any]:
        for database in self.params.databases:
            if self.catalog.database_location(database) is None:
                self.ledger.note("kept", database, "database does not exist")
                continue
            for parsed, ref in self.catalog.reserved_tables(database):
                info = self.catalog.table_info(ref)
                if info is not None:
                    self._table(parsed, info)
            for name in self.catalog.fs.list_names(self.catalog.db_location(database)):
                self._directory(database, name)
        return self.ledger.report()

    def _location_of(self, qualified: str) -> str | None:
        try:
            info = self.catalog.table_info(TableRef.parse(qualified))
        except InvalidInputError:
            return None
        return info.location.rstrip("/") if info and info.location else None

    def _live(self, qualified: str) -> list[str]:
        try:
            return self.catalog.live_locations(TableRef.parse(qualified))
        except InvalidInputError:
            return []

    def _table(self, parsed: markers.ReservedName, info: TableInfo) -> None:
        what = info.ref.qualified
        props = info.properties
        if parsed.role == "backup":
            self._backup(info)
            return
        if parsed.role == "claim":
            self._claim(info)
            return
        adopted_by = self._adopted_by(info, parsed) if markers.marker_try(props) != parsed.try_number else None
        due = self.ledger.owner_if_due(what, props, ownership.is_staging_named(props, parsed, adopted_by))
        if due is None:
            return
        txn_id, task = due
        live = self._location_of(props.get(markers.TARGET, ""))
        if info.table_type != "EXTERNAL" and live and info.location and live == info.location.rstrip("/"):
            self.ledger.note("kept", what, "a managed staging table that a target reads from (unexpected)")
            return
        if not self.params.dry_run:
            self.catalog.drop(info.ref)
        kind = "metadata only" if info.table_type == "EXTERNAL" else "with its data"
        self.ledger.note("removed", what, f"orphan staging table ({kind})", txn_id=txn_id, task=task)

    def _claim(self, info: TableInfo) -> None:
        """A claim on a target's name, left by a task killed while it renamed into it."""
        what, props = info.ref.qualified, info.properties
        due = self.ledger.owner_if_due(
            what, props, info.table_type == "VIEW" and markers.is_claim(props, info.ref.table)
        )
        if due is None:
            return
        txn_id, task = due
        if not self.params.dry_run:
            self.catalog.drop_view(info.ref)
        self.ledger.note("removed", what, f"a claim on {props[markers.TARGET]}'s name left by a killed rename",
                         txn_id=txn_id, task=task)  # fmt: skip

    def _adopted_by(self, info: TableInfo, parsed: markers.ReservedName) -> int | None:
        """The later try that took this staging over (durable tries), as its prepared record says."""
        if not info.location:
            return None
        record = PreparedRecord.parse(self.catalog.fs.read_text(f"{info.location.rstrip('/')}/{RECORD_FILE}"))
        written_by = (markers.txn_tag(record.txn_id), record.prepared_by_try) if record else None
        if record is None or written_by != (parsed.tag, parsed.try_number):
            return None
        return record.held_by_try

    def _backup(self, info: TableInfo) -> None:
        what, props = info.ref.qualified, info.properties
        moved = ownership.moved_aside_by(props)
        if moved is None:
            self.ledger.note("kept", what, "reserved name without this provider's markers")
            return
        txn_id, target_name = moved
        if self.ledger.blocked(what, txn_id, props.get(markers.SUPERSEDED_AT), {}):
            return
        target = TableRef.parse(target_name)
        current = self.catalog.table_info(target)
        if current is None:
            if not self.params.dry_run:
                gc_markers = {markers.TXN_ID: txn_id, markers.TRY_NUMBER: "0", markers.TARGET: target.qualified,
                              markers.CREATED_AT: now_iso()}  # fmt: skip
                with name_claimed(self.catalog, target, gc_markers, self.log):  # may move its directory back
                    self.catalog.rename_in_place(info, target)
            self.ledger.note("restored", what, f"renamed back to {target}: an interrupted swap had moved it aside")
        elif current.properties.get(markers.TXN_ID) == txn_id and ownership.created_by_provider(props):
            if not self.params.dry_run:
                self.catalog.drop(info.ref)
            self.ledger.note("removed", what, f"superseded version of {target} that this provider had created")
        else:
            self.ledger.note(
                "kept", what, f"previous version of {target}, not created by this provider (or replaced since)"
            )

    def _directory(self, database: str, name: str) -> None:
        location = self.catalog.db_location(database)
        path = f"{location}/{name}"
        reserved = markers.parse_reserved_name(name)
        registered = self.catalog.spark.catalog.tableExists(TableRef(database, name.lower()).quoted)
        if registered and (reserved or self._location_of(f"{database}.{name}") == path):
            return  # a table lives here (its staging table was handled above)
        marker = self.catalog.read_marker(path)
        if marker is None:
            if reserved:
                self._unmarked(path, reserved)
            return
        live = self._live(marker.target)
        if ownership.feeds(path, live):
            self._retired_partitions(path, live)
        elif marker.published_at is None:
            if not self.ledger.blocked(path, marker.txn_id, marker.created_at, marker.task):
                self._delete(path, "orphan staging directory", txn_id=marker.txn_id, task=marker.task)
        elif not live and self.catalog.superseded_record(path) is None:
            self._unread(database, path, marker)
        else:
            self._superseded(path, marker)

    def _unread(self, database: str, path: str, marker: markers.MarkerFile) -> None:
        """Published data whose target no longer exists: read by a table renamed since, or left by a
        DROP TABLE. On an object store this provider's tables are external (their data outlives
        DROP TABLE), so data no table of the database reads goes; elsewhere a dropped table took its
        data with it, and what is left is kept for a person to look at."""
        reader = next((t for t, live in self._database_readers(database).items() if ownership.feeds(path, live)), None)
        if reader is not None:
            self.ledger.note("kept", path, f"published data of {marker.target}, read by {reader}")
        elif not on_object_store(path):
            self.ledger.note("kept", path, f"published data of {marker.target}, which no longer exists (renamed?)")
        else:
            self._superseded(path, marker, f"data of {marker.target}, dropped since (an external table)")

    def _database_readers(self, database: str) -> dict[str, list[str]]:
        """Every table of ``database`` and where it reads from (computed once per pass)."""
        if database not in self._readers:
            self._readers[database] = {
                ref.qualified: self.catalog.live_locations(ref) for ref in self.catalog.tables(database)
            }
        return self._readers[database]

    def _unmarked(self, path: str, name: markers.ReservedName) -> None:
        """A directory under a reserved name without our marker file. Another strategy's staging
        may keep its markers elsewhere (a Delta staging table's are in its log's first commit): a
        directory whose markers, read by that strategy, are those the name promises is that staging,
        its task killed before the catalog entry was made. Otherwise only an empty directory goes."""
        for reader in self.staging_readers:
            logged = reader.read(self.catalog.fs, path)
            if logged is not None and name.role == "staging" and ownership.is_staging_named(logged, name):
                txn_id, task = logged[markers.TXN_ID], markers.task_of(logged)
                if not self.ledger.blocked(path, txn_id, logged.get(markers.CREATED_AT), task):
                    why = f"orphan {reader.name} staging table without a catalog entry"
                    self._delete(path, why, txn_id=txn_id, task=task)
                return
        if self.catalog.fs.has_files(path):
            self.ledger.note("kept", path, "reserved name but no marker file of this provider")
            return
        modified = datetime.fromtimestamp(self.catalog.fs.modified_at(path), UTC).isoformat()
        if not self.ledger.blocked(path, "", modified, {}):
            self._delete(path, "empty directory under a reserved name")

    def _retired_partitions(self, path: str, live: list[str]) -> None:
        """The target reads from ``path`` (its location, or partitions in it); partitions in it that
        were superseded go once their retention has ended."""
        for retired, record in self._records_within(path):
            if not ownership.feeds(retired, live) and self._retention_over(retired, record):
                self._delete(
                    retired, f"a superseded partition of {record.target}, retained until {record.delete_after}"
                )

    def _superseded(self, path: str, marker: markers.MarkerFile, why: str = "") -> None:
        """Published data no table reads any more (a superseded version; on an object store also
        a dropped table's): kept while a retention record says readers may still use it."""
        why = why or f"a superseded version of {marker.target}"
        records = self._records_within(path)
        if records:
            if all(self._retention_over(retired, record) for retired, record in records):
                self._delete(path, f"{why}, its retention over", txn_id=marker.txn_id)
            return
        if not self.ledger.blocked(path, marker.txn_id, marker.published_at, marker.task):
            self._delete(path, why, txn_id=marker.txn_id)

    def _records_within(self, path: str, depth: int = 4) -> list[tuple[str, markers.SupersededRecord]]:
        """Superseded versions at ``path`` or in partition directories below it (records written by
        the publish that superseded them)."""
        record = markers.SupersededRecord.parse(self.catalog.fs.read_text(f"{path}/{markers.SUPERSEDED_FILE}"))
        if record is not None:
            return [(path, record)]
        if depth == 0:
            return []
        found = []
        for name in self.catalog.fs.list_names(path):
            if "=" in name:
                found += self._records_within(f"{path}/{name}", depth - 1)
        return found

    def _retention_over(self, path: str, record: markers.SupersededRecord) -> bool:
        due = markers.parse_time(record.delete_after)
        if due is None or due > self.ledger.now:
            self.ledger.note(
                "kept", path, f"superseded version of {record.target}, kept for readers until {record.delete_after}"
            )
            return False
        return not self.ledger.blocked(path, record.superseded_by.split(":", 1)[0], record.delete_after, {})

    def _delete(self, path: str, why: str, **extra: Any) -> None:
        if not self.params.dry_run:
            try:
                self.catalog.fs.delete(path)
            except Exception as exc:  # noqa: BLE001 - one undeletable path must not stop the pass; it is reported as kept
                self.ledger.note("kept", path, f"could not delete: {first_line(exc)}")
                return
        self.ledger.note("removed", path, why, **extra)
