"""Reading a table's comments and setting them, through the Spark API every catalog serves
(Hive metastore, Iceberg's and Delta's catalogs, over Spark Connect too)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.core.comments import Comments
from airflow_provider_ctas.core.identifiers import TableRef, quote, sql_string_literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def schema_comments(schema: StructType) -> dict[str, str]:
    return {f.name.lower(): f.metadata["comment"] for f in schema.fields if f.metadata.get("comment")}


def read_comments(spark: SparkSession, ref: TableRef) -> Comments:
    """The comments ``ref`` has now (Iceberg's ``doc``, Delta's and Hive's ``comment``)."""
    columns = schema_comments(spark.table(ref.quoted).schema)
    return Comments(table=spark.catalog.getTable(ref.quoted).description or None, columns=columns)


def set_comments(spark: SparkSession, ref: TableRef, changes: Comments) -> list[str]:
    """Set what ``changes`` names on an existing table; returns what it set."""
    done = []
    if changes.table is not None:
        spark.sql(f"COMMENT ON TABLE {ref.quoted} IS {sql_string_literal(changes.table)}")
        done.append("the table's comment")
    for column, text in sorted(changes.columns.items()):
        spark.sql(f"ALTER TABLE {ref.quoted} ALTER COLUMN {quote(column)} COMMENT {sql_string_literal(text)}")
        done.append(f"{column}'s comment")
    return done


def with_column_comments(frame: DataFrame, comments: Comments) -> DataFrame:
    """``frame`` whose columns carry ``comments`` as Spark's column metadata (what a table created
    from it keeps as column comments); its other metadata stays."""
    from pyspark.sql.functions import col

    if not comments.columns:
        return frame
    columns = []
    for f in frame.schema.fields:
        text = comments.columns.get(f.name.lower())
        columns.append(
            col(quote(f.name))
            if text is None
            else col(quote(f.name)).alias(f.name, metadata={**f.metadata, "comment": text})
        )
    return frame.select(*columns)
