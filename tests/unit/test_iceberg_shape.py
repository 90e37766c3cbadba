"""Which query schemas a same-shape Iceberg replace accepts (pure logic; the refusal itself runs in
tests/integration/test_iceberg.py)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    DecimalType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from airflow_provider_ctas.catalogs.iceberg.shape import same_columns

TABLE = [("id", "long"), ("amount", "decimal(10, 2)"), ("at", "timestamptz"), ("score", "double")]


def _schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in fields])  # type: ignore[arg-type]


def test_the_same_columns_match_whatever_iceberg_spells_a_decimal():
    schema = _schema(
        ("ID", LongType()), ("amount", DecimalType(10, 2)), ("at", TimestampType()), ("score", FloatType())
    )
    assert same_columns(TABLE, schema)


def test_an_int_is_written_into_a_long_column():
    schema = _schema(
        ("id", IntegerType()), ("amount", DecimalType(10, 2)), ("at", TimestampType()), ("score", FloatType())
    )
    assert same_columns(TABLE, schema)


@pytest.mark.parametrize(
    "fields",
    [
        (("id", LongType()), ("amount", DecimalType(12, 2)), ("at", TimestampType()), ("score", FloatType())),
        (("id", StringType()), ("amount", DecimalType(10, 2)), ("at", TimestampType()), ("score", FloatType())),
        (("id", LongType()), ("amount", DecimalType(10, 2)), ("at", TimestampType())),
        (("amount", DecimalType(10, 2)), ("id", LongType()), ("at", TimestampType()), ("score", FloatType())),
    ],
)
def test_another_type_a_missing_column_or_another_order_is_a_new_shape(fields):
    assert not same_columns(TABLE, _schema(*fields))
