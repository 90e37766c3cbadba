"""The soak run's table in its format: how its old version is made, how readers poll it, and what of
the provider's it may leave. A file-format table is read by the test's own Spark session; Iceberg
and Delta tables by their format's independent reader (its own Spark 4.1 JVM with the format's
runtime: ``tests/support/table_reader.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from tests.support.catalog import database_dir, fresh, leftovers
from tests.support.delta import DeltaReader
from tests.support.faults import Reader, classify_read_error
from tests.support.iceberg import CATALOG
from tests.support.iceberg import leftovers as iceberg_leftovers
from tests.support.objectstore import s3_leftovers
from tests.support.table_reader import TablePoller, TableReader

if TYPE_CHECKING:
    from ctas_devstack.s3 import S3Server


class Watch(Protocol):
    def stop(self) -> list[Any]: ...


class SoakTable:
    """A file-format table in Spark's session catalog."""

    table_format = "parquet"

    def __init__(self, spark: Any, database: str, name: str) -> None:
        self.spark, self.database = spark, database
        self.name = f"{database}.{name}"

    def create(self, select: str, partitioned: bool) -> None:
        self.spark.sql(self._create(select, partitioned))

    def _create(self, select: str, partitioned: bool) -> str:
        partitioning = " PARTITIONED BY (p)" if partitioned else ""
        return f"CREATE TABLE {self.name} USING {self.table_format}{partitioning} AS {select}"

    def rows(self) -> int | str:
        try:
            return int(fresh(self.spark).table(self.name).count())
        except Exception as exc:
            return type(exc).__name__

    def watch(self) -> Watch:
        return Reader(self.spark, self.name).start()

    def leftovers(self) -> list[str]:
        return leftovers(self.spark, self.database)


class S3SoakTable(SoakTable):
    """A file-format table in a database in ``bucket`` of the S3 server: what is left is read in the
    bucket (staging directories, write debris, incomplete multipart uploads)."""

    def __init__(self, spark: Any, database: str, name: str, server: S3Server, bucket: str) -> None:
        super().__init__(spark, database, name)
        self.server, self.bucket = server, bucket

    def leftovers(self) -> list[str]:
        return s3_leftovers(self.spark, self.server, self.bucket, self.database)


class FormatTable(SoakTable):
    """An Iceberg or Delta table, read through its format's own reader."""

    def __init__(self, spark: Any, database: str, name: str, reader: TableReader) -> None:
        super().__init__(spark, database, name)
        self.reader = reader

    def create(self, select: str, partitioned: bool) -> None:
        self.reader.rows(self._create(select, partitioned))

    def rows(self) -> int | str:
        try:
            return int(self.reader.value(f"SELECT count(*) FROM {self.name}"))
        except AssertionError as exc:
            return classify_read_error(exc)

    def watch(self) -> Watch:
        return TablePoller(self.reader, self.name, interval=1.0, rows_only=True).start()


class IcebergTable(FormatTable):
    """In the Iceberg catalog ``catalog`` (the Hive-metastore one, ``ice``, or a REST catalog, whose
    namespace is made here): staging tables, branches and fences are the provider's (a table created
    by renaming its staging table keeps that directory: the catalog moves no files)."""

    table_format = "iceberg"

    def __init__(self, spark: Any, database: str, name: str, reader: TableReader, catalog: str = CATALOG) -> None:
        super().__init__(spark, database, name, reader)
        self.namespace = f"{catalog}.{database}"
        self.name = f"{self.namespace}.{name}"
        if catalog != CATALOG:  # the metastore's catalog shows the metastore's databases
            reader.rows(f"CREATE NAMESPACE IF NOT EXISTS {self.namespace}")

    def leftovers(self) -> list[str]:
        return iceberg_leftovers(self.reader, self.namespace, self.name)


class DeltaTable(FormatTable):
    """In Delta's session catalog: staging tables, and directories under reserved names (a Delta
    table's files and log are written before its catalog entry exists)."""

    table_format = "delta"

    def __init__(self, spark: Any, database: str, name: str, reader: DeltaReader) -> None:
        super().__init__(spark, database, name, reader)
        self.delta = reader

    def leftovers(self) -> list[str]:
        directories = sorted(f"{p.name}/" for p in database_dir(self.spark, self.database).glob("__ctas_*"))
        return self.delta.staging_tables(self.database) + directories


def soak_table(spark: Any, database: str, name: str, reader: TableReader | None, catalog: str = CATALOG) -> SoakTable:
    """The run's table ``name`` in ``database``, read by ``reader`` (None for a file-format table);
    an Iceberg table in ``catalog``."""
    if reader is None:
        return SoakTable(spark, database, name)
    if isinstance(reader, DeltaReader):
        return DeltaTable(spark, database, name, reader)
    return IcebergTable(spark, database, name, reader, catalog)
