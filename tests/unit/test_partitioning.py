"""``partition_by`` entries: columns everywhere, Iceberg's partition transforms for Iceberg tables,
one canonical spelling, and SQL in which the column is always quoted."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.catalogs.delta.table import DeltaTable
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.partitioning import parse_field, source_columns, validate_partition_by
from airflow_provider_ctas.spark.ddl import create_table_sql


def test_transforms_are_spelled_one_way_whatever_the_user_wrote():
    entries = ["DS", " Days( ts ) ", "BUCKET(16,id)", "truncate( 4 , name )", "hours(t2)", "years(t3)", "months(t4)"]
    assert validate_partition_by(entries) == (
        "ds", "days(ts)", "bucket(16, id)", "truncate(4, name)", "hours(t2)", "years(t3)", "months(t4)"
    )  # fmt: skip
    assert source_columns(["days(ts)", "bucket(16, id)", "ds"]) == ["ts", "id", "ds"]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["days(ts)", "DAYS(ts)"], "names 'days(ts)' twice"),
        (["weeks(ts)"], "is not a partition transform this provider knows"),
        (["bucket(0, id)"], "the width must be at least 1"),
        (["days(ts); DROP TABLE x"], "is not a partition transform"),
        (["days(`ts`)"], "column in partition_by '`ts`' contains '`'"),
        (["bucket(16, id, x)"], "is not a partition transform"),
        ("ds", "must be a list"),
        ([7], "must be a string"),
    ],
)
def test_bad_entries_are_refused_with_what_is_wrong(entries, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_partition_by(entries)


def test_sql_quotes_the_column_inside_a_transform():
    assert [parse_field(e).sql() for e in ("ds", "days(ts)", "bucket(16, id)")] == [
        "`ds`", "days(`ts`)", "bucket(16, `id`)"
    ]  # fmt: skip


def test_only_iceberg_tables_take_transforms():
    assert IcebergTable.validate_partition_by(["days(ts)"]) == ("days(ts)",)
    with pytest.raises(InvalidInputError, match=r"uses partition transforms, which only Iceberg tables have; Delta"):
        DeltaTable.validate_partition_by(["days(ts)"])
    assert DeltaTable.validate_partition_by(["ds"]) == ("ds",)


def test_create_table_partitions_by_the_transform():
    from pyspark.sql.types import LongType, StructField, StructType, TimestampType

    schema = StructType([StructField("id", LongType()), StructField("ts", TimestampType())])
    sql = create_table_sql("`lake`.`db`.`t`", schema, "iceberg", ["days(ts)", "bucket(4, id)"], {"k": "v"})
    assert "PARTITIONED BY (days(`ts`), bucket(4, `id`))" in sql
