"""What the session-catalog strategy needs from Spark's catalog and filesystem, in one place.

Shared by the transaction phases and garbage collection; every statement quotes its names and
passes values as string literals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import DatabaseNotFoundError, UnsupportedTargetError
from airflow_provider_ctas.core.identifiers import TableRef, quote, sql_string_literal
from airflow_provider_ctas.core.requirements import AssertNoNewerStaging, Observed
from airflow_provider_ctas.spark.catalog_entry import METASTORE_PROVIDERS, CatalogEntry
from airflow_provider_ctas.spark.engine import engine_for, is_connect
from airflow_provider_ctas.spark.statements import statement_rows

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession


GLUE_CLIENT_FACTORY_SETTING = "hive.metastore.client.factory.class"
"""Set to AWS's ``AWSGlueDataCatalogHiveClientFactory`` where Glue's Data Catalog is the metastore (EMR)."""


@dataclass(frozen=True)
class TableInfo(CatalogEntry):
    """A table's catalog entry and the name it was read under."""

    ref: TableRef


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class CatalogClient:
    def __init__(self, spark: SparkSession, scratch_database: str | None = None) -> None:
        self.spark = spark
        self.engine = engine_for(spark)
        self.fs = self.engine.filesystem(scratch_database)
        self._db_locations: dict[str, str] = {}

    def sql(self, statement: str) -> list[Row]:
        return statement_rows(self.spark, statement)

    def table_info(self, ref: TableRef, expected: bool = False, storage: bool = False) -> TableInfo | None:
        """The table as the metastore has it now, or None (also when a concurrent try drops it
        while it is being read). ``expected``: the caller knows it is there (a commit re-reading
        the target begin found), so its existence is not asked first, a round trip over Spark
        Connect; were it gone after all, Spark logs the failed statement's error. ``storage``: with
        its storage options (over Spark Connect a round trip more, for a table that has options)."""
        entry = self.engine.table_entry(ref, expected, storage)
        return None if entry is None else TableInfo(**dataclasses.asdict(entry), ref=ref)

    def location(self, ref: TableRef) -> str | None:
        """Where the table's data is now, or None when it is gone: the cheapest read that can
        tell whether another try flipped it."""
        return self.engine.table_location(ref)

    def properties(self, ref: TableRef) -> dict[str, str] | None:
        """A table's properties; None when the table is gone."""
        return self.engine.table_properties(ref)

    def read_marker(self, location: str) -> markers.MarkerFile | None:
        return markers.MarkerFile.parse(self.fs.read_text(f"{location.rstrip('/')}/{markers.MARKER_FILE}"))

    def superseded_record(self, location: str) -> markers.SupersededRecord | None:
        """The record a publish left in a version it superseded and keeps for readers."""
        return markers.SupersededRecord.parse(self.fs.read_text(f"{location.rstrip('/')}/{markers.SUPERSEDED_FILE}"))

    def mark_published(
        self,
        location: str,
        txn_id: str,
        published_at: str,
        retained: tuple[markers.Retained, ...] = (),
        read: markers.MarkerFile | None = None,
    ) -> None:
        """Record in the directory's marker that it now holds the target's data, and which superseded
        versions it keeps for readers; ``read``: the marker as the caller read it after the publish."""
        marker = read or self.read_marker(location)
        if marker is not None and marker.txn_id == txn_id:
            path = f"{location.rstrip('/')}/{markers.MARKER_FILE}"
            updated = dataclasses.replace(marker, published_at=published_at, retained=retained)
            self.fs.write_text(path, updated.to_json())

    def shared(self) -> bool:
        """Whether another process can change this metastore: a metastore service, or an embedded
        metastore over a database server. Spark's embedded Derby admits one process (Derby locks its
        directory), and Spark serializes that process's catalog calls. Over Spark Connect the server's
        hive-site.xml is out of reach: shared."""
        if is_connect(self.spark) or self.engine.metastore_uris():
            return True
        url = self.engine.hive_setting("javax.jdo.option.ConnectionURL")
        return bool(url) and not (url.startswith("jdbc:derby:") and not url.startswith("jdbc:derby://"))

    def database_location(self, database: str) -> str | None:
        """The database's location, or None when there is no such database (read once)."""
        if database not in self._db_locations:
            location = self.engine.database_location(database)
            if location is None:
                return None
            self._db_locations[database] = location.rstrip("/")
        return self._db_locations[database]

    def db_location(self, database: str) -> str:
        location = self.database_location(database)
        if location is None:
            raise DatabaseNotFoundError(
                f"database {database!r} does not exist in Spark's session catalog; create it first"
            )
        return location

    def require_no_newer_try(self, database: str, txn_id: str, try_number: int) -> None:
        """Fails ``FENCED`` when a newer try of ``txn_id`` has a staging directory in the database's
        directory: every try's begin makes one there (a managed staging table's, a flip's or a
        partition switch's marked directory, a Delta table's), so one listing sees every try that
        has begun."""
        names = frozenset(self.fs.marked_names(self.db_location(database), markers.name_pattern(txn_id)))
        AssertNoNewerStaging(txn_id, try_number).validate(Observed(names=names))

    def reserved_tables(self, database: str, txn_id: str | None = None) -> list[tuple[markers.ReservedName, TableRef]]:
        """Tables under this provider's reserved names (optionally of one transaction)."""
        rows = self.sql(f"SHOW TABLES IN {quote(database)} LIKE {sql_string_literal(markers.name_pattern(txn_id))}")
        found = []
        for row in rows:
            parsed = markers.parse_reserved_name(row["tableName"])
            if parsed and (txn_id is None or parsed.tag == markers.txn_tag(txn_id)):
                found.append((parsed, TableRef(database, row["tableName"].lower())))
        return found

    def partitions(self, ref: TableRef, columns: list[str]) -> dict[tuple[str, ...], str]:
        """Partition values (in ``columns`` order) to location."""
        return self.engine.partitions(ref, columns)

    def tables(self, database: str) -> list[TableRef]:
        rows = self.sql(f"SHOW TABLES IN {quote(database)}")
        return [TableRef(database, row["tableName"]) for row in rows if not row["isTemporary"]]

    def live_locations(self, ref: TableRef) -> list[str]:
        """Where ``ref`` reads data from: its location and, if partitioned, every partition's."""
        info = self.table_info(ref)
        if info is None:
            return []
        live = [info.location.rstrip("/")] if info.location else []
        if info.partition_columns:
            live += [loc.rstrip("/") for loc in self.partitions(ref, info.partition_columns).values()]
        return live

    def set_properties(self, ref: TableRef, properties: dict[str, str]) -> None:
        self.engine.set_properties(ref, properties)

    def relocate(self, ref: TableRef, location: str, properties: dict[str, str]) -> Callable[[], None] | None:
        """Location and properties in one catalog call; the undo, or None where only statements can."""
        return self.engine.relocate(ref, location, properties)

    def rename(self, source: TableRef, dest: TableRef) -> None:
        """For a table at its default location (staging this try created): the metastore moves a
        managed one's directory to ``dest``'s default location."""
        self.sql(f"ALTER TABLE {source.quoted} RENAME TO {quote(dest.database)}.{quote(dest.table)}")

    def renames_by_copy(self) -> str | None:
        """The Hive client factory, when it is AWS Glue's Data Catalog client: Glue has no rename, so
        that client renames a table by creating the new one (its partitions added in batches) and
        deleting the old, and a reader can find both, or a partial one, in between."""
        factory = self.engine.hive_setting(GLUE_CLIENT_FACTORY_SETTING)
        return factory if "glue" in factory.lower() else None

    def default_location(self, ref: TableRef) -> str:
        """Where the metastore keeps a managed table of that name, and moves one renamed to it."""
        return f"{self.db_location(ref.database)}/{ref.table}"

    def off_default_location(self, info: TableInfo) -> bool:
        """A managed table whose data is elsewhere than its default location (a flip put it there):
        Spark's rename would point it at the new name's default location and lose its data."""
        return info.table_type == "MANAGED" and (info.location or "").rstrip("/") != self.default_location(info.ref)

    def can_rename_in_place(self, info: TableInfo) -> bool:
        return not self.off_default_location(info) or (
            not is_connect(self.spark) and info.provider.lower() in METASTORE_PROVIDERS
        )

    def rename_in_place(self, info: TableInfo, dest: TableRef) -> None:
        """Rename a table this try did not just create (a target moved aside, a backup put back)
        so that it keeps reading what it read: one off its default location is made external first
        (``engine.make_external``), and then renames as metadata only."""
        if self.off_default_location(info) and not self.engine.make_external(info.ref):
            raise UnsupportedTargetError(
                f"{info.ref} is a managed table at {info.location}, not at its default location; renamed, "
                f"Spark would point it at {self.default_location(dest)}, and this session cannot make it "
                "external first (Spark Connect, or a provider with its own catalog)"
            )
        self.rename(info.ref, dest)

    def drop(self, ref: TableRef) -> None:
        self.engine.drop(ref)

    def create_view(self, ref: TableRef, comment: str, properties: Mapping[str, str]) -> None:
        """A view of one constant row; fails if the name is taken (the metastore creates a name once)."""
        self.engine.create_view(ref, comment, properties)

    def drop_view(self, ref: TableRef) -> None:
        """Only a view: ``drop`` refuses one, so that a table call never removes a user's view."""
        self.engine.drop_view(ref)
