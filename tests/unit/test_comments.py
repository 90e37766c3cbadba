"""Table and column comments: what a publish gives the table, and what is refused before any work."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from airflow_provider_ctas.catalogs import create_two_phase_table, load_two_phase_table
from airflow_provider_ctas.core.comments import MAX_COLUMN_COMMENT, Comments, validate_comments
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.spark.ddl import create_table_sql

KEY = TransactionKey("dag", "task", "manual__2024-01-01T00:00:00+00:00", -1)


def test_a_replace_keeps_the_comments_of_remaining_columns_and_takes_the_given_ones():
    existing = Comments(table="orders", columns={"id": "the id", "gone": "dropped column", "amount": "in EUR"})
    given = Comments(columns={"amount": "in USD"})
    assert given.over(existing, ["ID", "amount", "new"]) == Comments(
        table="orders", columns={"id": "the id", "amount": "in USD"}
    )
    assert Comments(table="new").over(existing, []) == Comments(table="new")
    assert Comments().over(Comments(), ["a"]) == Comments() and not Comments()


def test_only_what_differs_is_set_on_an_existing_table():
    current = Comments(table="t", columns={"a": "same", "b": "old"})
    wanted = Comments(table="t", columns={"a": "same", "b": "new", "c": "first"})
    assert wanted.changes_to(current) == Comments(columns={"b": "new", "c": "first"})
    assert Comments(table="other").changes_to(current) == Comments(table="other")
    assert not Comments(table="t").changes_to(current)


@pytest.mark.parametrize(
    ("comment", "columns", "message"),
    [
        (7, None, "comment must be a string"),
        ("x" * 4001, None, "at most 4000"),
        ("bell\x07", None, "control character"),
        (None, ["id"], "must be a dict"),
        (None, {"a b": "x"}, "contains"),
        (None, {"ID": "x", "id": "y"}, "twice"),
        (None, {"id": 3}, "must be a string"),
        (None, {"id": "x" * (MAX_COLUMN_COMMENT + 1)}, f"at most {MAX_COLUMN_COMMENT}"),
    ],
)
def test_bad_comments_are_refused_with_what_is_wrong(comment, columns, message):
    with pytest.raises(InvalidInputError, match=message):
        validate_comments(comment, columns)


def test_names_are_lowercased_and_a_column_the_query_lacks_is_refused():
    comments = validate_comments("multi\nline\tok", {"ID": "it's"})
    assert comments == Comments(table="multi\nline\tok", columns={"id": "it's"})
    comments.require_columns(["Id", "x"])
    with pytest.raises(InvalidInputError, match=r"column_comments names \['id'\], which the query does not produce"):
        comments.require_columns(["x"])


def test_the_ddl_carries_them_quoted():
    schema = StructType([StructField("id", LongType()), StructField("ds", StringType())])
    sql = create_table_sql("`d`.`t`", schema, "parquet", ["ds"], {"k": "v"}, comments=Comments("it's", {"ds": "a\\b"}))
    assert "(`id` bigint, `ds` string COMMENT 'a\\\\b')" in sql
    assert "COMMENT 'it\\'s'" in sql
    assert "COMMENT" not in create_table_sql("`d`.`t`", schema, "parquet", [], {"k": "v"})


@pytest.mark.parametrize(("table_format", "target"), [("parquet", "db.t"), ("iceberg", "lake.db.t"), ("delta", "db.t")])
def test_every_format_carries_them_to_its_driver_and_reads_state_from_before_them(table_format, target):
    table = create_two_phase_table(
        key=KEY, conn_id="spark_default", target=target, mode="replace", table_format=table_format,
        comment="the table", column_comments={"Id": "the id"},
    )  # fmt: skip
    data = table.to_dict()
    assert data["spec"]["comments"] == {"table": "the table", "columns": {"id": "the id"}}
    assert load_two_phase_table(data) == table
    del data["spec"]["comments"]  # stored by a provider version without comments: none asked for
    assert not load_two_phase_table(data).comments  # type: ignore[attr-defined]
    data["spec"]["comments"] = {"table": 1, "columns": {}}
    with pytest.raises(CorruptStateError, match="spec is invalid"):
        load_two_phase_table(data)
