"""What the session-catalog strategy needs from Spark's catalog and filesystem, in one place.

Shared by the transaction phases and garbage collection; every statement quotes its names and
passes values as string literals.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.identifiers import TableRef, quote, sql_string_literal
from airflow_provider_ctas.spark.engine import engine_for
from airflow_provider_ctas.spark.errors import error_condition

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession


@dataclass
class TableInfo:
    ref: TableRef
    table_type: str
    location: str | None
    provider: str
    properties: dict[str, str] = field(default_factory=dict)
    columns: list[tuple[str, str]] = field(default_factory=list)
    partition_columns: list[str] = field(default_factory=list)
    bucketed: bool = False


def parse_describe(rows: list[Row]) -> tuple[list[tuple[str, str]], list[str], dict[str, str]]:
    """Columns, partition columns and detail rows from ``DESCRIBE TABLE EXTENDED`` (which runs no job)."""
    columns: list[tuple[str, str]] = []
    partitions: list[str] = []
    details: dict[str, str] = {}
    section = "columns"
    for row in rows:
        name, value = row["col_name"] or "", row["data_type"] or ""
        if name == "# Partition Information":
            section = "partitions"
        elif name == "# Detailed Table Information":
            section = "details"
        elif not name or name.startswith("#"):
            if section == "columns" and not name:
                section = "after-columns"
        elif section == "columns":
            columns.append((name, value))
        elif section == "partitions":
            partitions.append(name)
        elif section == "details":
            details[name] = value
    return columns, partitions, details


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class CatalogClient:
    def __init__(self, spark: SparkSession, scratch_database: str | None = None) -> None:
        self.spark = spark
        self.engine = engine_for(spark)
        self.fs = self.engine.filesystem(scratch_database)
        self._db_locations: dict[str, str] = {}

    def sql(self, statement: str) -> list[Row]:
        return self.spark.sql(statement).collect()

    def table_info(self, ref: TableRef) -> TableInfo | None:
        """The table as the metastore has it now, or None. Existence is asked first: a statement on a
        missing table would make Spark log an ERROR with a stack trace, for an answer begin expects."""
        if not self.spark.catalog.tableExists(ref.quoted):
            return None
        described = self._rows_unless_gone(f"DESCRIBE TABLE EXTENDED {ref.quoted}")
        props = self.properties(ref) if described is not None else None
        if described is None or props is None:
            return None
        columns, partitions, rows = parse_describe(described)
        return TableInfo(
            ref,
            rows.get("Type", "").upper(),
            rows.get("Location"),
            rows.get("Provider", ""),
            props,
            columns,
            partitions,
            bucketed="Num Buckets" in rows,
        )

    def properties(self, ref: TableRef) -> dict[str, str] | None:
        """A table's properties in one statement; None when the table is gone."""
        rows = self._rows_unless_gone(f"SHOW TBLPROPERTIES {ref.quoted}")
        return None if rows is None else {row["key"]: row["value"] for row in rows}

    def _rows_unless_gone(self, statement: str) -> list[Row] | None:
        """None when the statement's table is gone: a concurrent try may drop it at any moment."""
        from pyspark.errors import AnalysisException

        try:
            return self.sql(statement)
        except AnalysisException as exc:
            if error_condition(exc).startswith("TABLE_OR_VIEW_NOT_FOUND"):
                return None
            raise

    def read_marker(self, location: str) -> markers.MarkerFile | None:
        return markers.MarkerFile.parse(self.fs.read_text(f"{location.rstrip('/')}/{markers.MARKER_FILE}"))

    def mark_published(
        self, location: str, txn_id: str, published_at: str, retained: tuple[markers.Retained, ...] = ()
    ) -> None:
        """Record in the directory's marker that it now holds the target's data, and which superseded
        versions it keeps for readers."""
        marker = self.read_marker(location)
        if marker is not None and marker.txn_id == txn_id:
            path = f"{location.rstrip('/')}/{markers.MARKER_FILE}"
            updated = dataclasses.replace(marker, published_at=published_at, retained=retained)
            self.fs.write_text(path, updated.to_json())

    def db_location(self, database: str) -> str:
        if database not in self._db_locations:
            self._db_locations[database] = str(self.spark.catalog.getDatabase(database).locationUri).rstrip("/")
        return self._db_locations[database]

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
        assignments = ", ".join(f"{sql_string_literal(k)}={sql_string_literal(v)}" for k, v in properties.items())
        self.sql(f"ALTER TABLE {ref.quoted} SET TBLPROPERTIES ({assignments})")

    def rename(self, source: TableRef, dest: TableRef) -> None:
        self.sql(f"ALTER TABLE {source.quoted} RENAME TO {quote(dest.database)}.{quote(dest.table)}")

    def drop(self, ref: TableRef) -> None:
        self.sql(f"DROP TABLE IF EXISTS {ref.quoted} PURGE")
