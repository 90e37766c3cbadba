"""A table's entry in Spark's session catalog, read the two ways a driver can.

``DESCRIBE TABLE EXTENDED`` and ``SHOW TBLPROPERTIES`` work on every session (Spark Connect too)
and for every provider, but each distinct command path costs a fresh driver JVM about a second on
first use (docs/profile.md). A classic session can instead ask its session catalog once
(``SessionCatalog.getTableRawMetadata``) and render the answer as those commands do. That is only
the same answer for file-source and Hive tables: for Delta (and any other provider with its own
catalog) the commands go through the provider's catalog and show the table's real schema and
properties, which the metastore entry does not hold.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.errors import error_condition
from airflow_provider_ctas.spark.statements import statement_rows

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

# Providers whose session-catalog entry is the whole table (Spark's own v1 sources and Hive serde).
METASTORE_PROVIDERS = frozenset({"parquet", "orc", "csv", "json", "avro", "text", "hive"})
# Spark hides these from SHOW TBLPROPERTIES (CatalogTable.VIEW_PREFIX).
VIEW_PROPERTY_PREFIX = "view."
# How the JVM's simpleString ends a type it cut short (``spark.sql.debug.maxToStringFields``).
CUT_SHORT = re.compile(r"\.\.\. \d+ more fields")
MISSING_CONDITIONS = ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND")
# What Spark shows instead of a value whose key matches ``spark.redaction.regex`` (Utils.REDACTION_REPLACEMENT_TEXT).
REDACTED = "*********(redacted)"


@dataclass(frozen=True)
class CatalogEntry:
    table_type: str
    """MANAGED, EXTERNAL or VIEW."""
    location: str | None
    provider: str
    properties: dict[str, str]
    columns: list[tuple[str, str]]
    """(name, type) as DESCRIBE shows them: declared CHAR/VARCHAR types, partition columns last."""
    partition_columns: list[str]
    bucketed: bool
    storage_options: dict[str, str] | None
    """The table's ``OPTIONS`` (a CSV separator, a compression codec): how its files are written
    and read, which a write into a directory of its own must repeat. Without ``path``. None where
    not asked for: through SQL they cost a round trip more, which only begin needs."""


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


def _rows_unless_gone(spark: SparkSession, statement: str) -> list[Row] | None:
    """None when the statement's table is gone: a concurrent try may drop it at any moment."""
    from pyspark.errors import AnalysisException

    try:
        return statement_rows(spark, statement)
    except AnalysisException as exc:
        if error_condition(exc).startswith("TABLE_OR_VIEW_NOT_FOUND"):
            return None
        raise


def properties_by_sql(spark: SparkSession, ref: TableRef) -> dict[str, str] | None:
    rows = _rows_unless_gone(spark, f"SHOW TBLPROPERTIES {ref.quoted}")
    return None if rows is None else {row["key"]: row["value"] for row in rows}


def described_location(spark: SparkSession, ref: TableRef) -> str | None:
    """The table's location from ``DESCRIBE TABLE EXTENDED`` alone, or None when it is gone."""
    rows = _rows_unless_gone(spark, f"DESCRIBE TABLE EXTENDED {ref.quoted}")
    return None if rows is None else parse_describe(rows)[2].get("Location")


def described(
    spark: SparkSession, ref: TableRef, at_once: bool = False, expected: bool = False, storage: bool = False
) -> CatalogEntry | None:
    """The entry through SQL. Existence is asked first unless the table is ``expected``: a
    statement on a missing table would make Spark log an ERROR with a stack trace, for an answer
    begin expects. ``at_once``: the two statements are sent together (over Spark Connect each is a
    round trip; issue 53). ``storage``: the storage options are read too."""
    if not expected and not spark.catalog.tableExists(ref.quoted):
        return None
    if at_once:
        with ThreadPoolExecutor(1, thread_name_prefix="airflow-ctas-describe") as pool:
            properties = pool.submit(properties_by_sql, spark, ref)
            rows = _rows_unless_gone(spark, f"DESCRIBE TABLE EXTENDED {ref.quoted}")
            props = properties.result()
    else:
        rows = _rows_unless_gone(spark, f"DESCRIBE TABLE EXTENDED {ref.quoted}")
        props = properties_by_sql(spark, ref) if rows is not None else None
    if rows is None or props is None:
        return None
    columns, partitions, details = parse_describe(rows)
    if any(CUT_SHORT.search(data_type) for _, data_type in columns):
        columns = _complete(spark, ref, columns)
    shown = details.get("Storage Properties")
    file_source = details.get("Provider", "").lower() in METASTORE_PROVIDERS
    options = None
    if storage:
        options = _storage_options_by_sql(spark, ref, shown) if shown and file_source else {}
    return CatalogEntry(
        details.get("Type", "").upper(),
        details.get("Location"),
        details.get("Provider", ""),
        props,
        columns,
        partitions,
        bucketed="Num Buckets" in details,
        storage_options=options,
    )


def _storage_options_by_sql(spark: SparkSession, ref: TableRef, shown: str) -> dict[str, str]:
    """The options as ``DESCRIBE ... AS JSON`` gives them (Spark 4.0 and later), else as ``shown``
    by ``DESCRIBE``'s own row, which joins them with ", " as a value (a CSV separator) may hold too.
    A round trip more, asked only of a table that has options."""
    from pyspark.errors import PySparkException

    try:
        rows = statement_rows(spark, f"DESCRIBE TABLE EXTENDED {ref.quoted} AS JSON")
        found = json.loads(str(rows[0][0])).get("storage_properties") or {}
    except PySparkException:  # a server before Spark 4.0: no AS JSON
        return without_path(parse_storage_properties(shown))
    return without_path({str(k): str(v) for k, v in found.items()})


def parse_storage_properties(shown: str) -> dict[str, str]:
    """``[k1=v1, k2=v2]`` as ``DESCRIBE`` shows a table's options; a piece without ``=`` is part of
    the value before it (which held ", ")."""
    options: dict[str, str] = {}
    key = None
    for piece in shown.strip()[1:-1].split(", "):
        if "=" in piece or key is None:
            key, _, value = piece.partition("=")
            options[key] = value
        else:
            options[key] += ", " + piece
    return options


def without_path(options: dict[str, str]) -> dict[str, str]:
    """A table's options without its location, which the table's entry holds on its own."""
    return {k: v for k, v in options.items() if k.lower() != "path"}


def _complete(spark: SparkSession, ref: TableRef, columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """DESCRIBE's types with each cut-short one (see :func:`columns_of`) as pyspark renders it."""
    full = {f.name: f.dataType.simpleString() for f in spark.table(ref.quoted).schema.fields}
    return [(name, full.get(name, kind) if CUT_SHORT.search(kind) else kind) for name, kind in columns]


def raw_metadata(spark: SparkSession, ref: TableRef) -> Any | None:
    """The JVM ``CatalogTable`` in one metastore call, or None when there is no such table (which
    the catalog reports without logging, unlike a SQL statement)."""
    from pyspark.errors import AnalysisException

    jvm: Any = spark._jvm
    identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier(ref.table, jvm.scala.Some(ref.database))
    try:
        return spark._jsparkSession.sessionState().catalog().getTableRawMetadata(identifier)
    except AnalysisException as exc:  # what pyspark's py4j hook makes of NoSuchTableException
        if error_condition(exc).startswith(MISSING_CONDITIONS):
            return None
        raise


def serves_fully(metadata: Any) -> bool:
    """Whether the metastore entry is the whole table (see the module's docstring)."""
    provider = metadata.provider()
    return provider.isDefined() and str(provider.get()).lower() in METASTORE_PROVIDERS


def properties_of(spark: SparkSession, metadata: Any) -> dict[str, str]:
    """The table's own properties, as ``SHOW TBLPROPERTIES`` lists them, without what that command
    adds or hides on some versions: a Hive table's storage options (``option.*``, Spark 4) and the
    masking of values whose keys look like secrets (``spark.redaction.regex``)."""
    rendered = _scala_map(spark, metadata.properties())
    return {k: v for k, v in rendered.items() if not k.startswith(VIEW_PROPERTY_PREFIX)}


def _scala_map(spark: SparkSession, scala_map: Any) -> dict[str, str]:
    """A Scala map of strings as one JSON document: a py4j map costs two round trips per entry."""
    jvm: Any = spark._jvm
    java_map = jvm.scala.collection.JavaConverters.mapAsJavaMap(scala_map)
    rendered = json.loads(str(jvm.com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(java_map)))
    return {str(k): str(v) for k, v in rendered.items()}


def columns_of(metadata: Any) -> list[tuple[str, str]]:
    """Each column's type as pyspark renders it, the way begin renders the query's columns.

    ``DESCRIBE`` renders with the JVM's ``simpleString``, which cuts a struct of more than
    ``spark.sql.debug.maxToStringFields`` (25) fields short (``..., 5 more fields>``), so a table
    with a wide struct never matched its own query; pyspark's rendering is complete. The raw
    schema keeps declared CHAR/VARCHAR types, as ``DESCRIBE`` shows them.
    """
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(str(metadata.schema().json())))
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def entry_of(spark: SparkSession, metadata: Any) -> CatalogEntry:
    """A ``CatalogTable`` as ``DESCRIBE TABLE EXTENDED`` and ``SHOW TBLPROPERTIES`` show it (but
    for the completeness of wide struct types, see :func:`columns_of`)."""
    jvm: Any = spark._jvm
    partition_names = metadata.partitionColumnNames()
    location, options = metadata.storage().locationUri(), metadata.storage().properties()
    return CatalogEntry(
        str(metadata.tableType().name()).upper(),
        str(jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.URIToString(location.get()))
        if location.isDefined()
        else None,
        str(metadata.provider().get()) if metadata.provider().isDefined() else "",
        properties_of(spark, metadata),
        columns_of(metadata),
        [str(partition_names.apply(i)) for i in range(partition_names.length())],
        bucketed=bool(metadata.bucketSpec().isDefined()),
        storage_options={} if options.isEmpty() else without_path(_scala_map(spark, options)),
    )
