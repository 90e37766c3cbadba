"""Construction-time behaviour of the operator (pure logic; the lifecycle is proven end to end)."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.operators.atomic_ctas import ctas_abort, ctas_begin, ctas_finalize


def make(**kwargs) -> AtomicCtasOperator:
    options = {"task_id": "t", "sql": "SELECT 1", "target_table": "db.t"}
    options.update(kwargs)
    return AtomicCtasOperator(**options)


def test_lifecycle_callbacks_come_first_and_user_callbacks_still_run():
    def mine(context):
        return None

    op = make(on_success_callback=mine, on_failure_callback=[mine, mine])
    assert op.on_execute_callback == [ctas_begin]
    assert op.on_success_callback == [ctas_finalize, mine]
    assert op.on_failure_callback == [ctas_abort, mine, mine]
    assert op.on_retry_callback == [ctas_abort]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "upsert"}, "mode 'upsert' is not supported"),
        ({"table_format": "delta"}, "not a file format"),
        ({"target_table": "db.t;x"}, "contains"),
        ({"target_table": "a.b.c.d"}, "4 parts"),
        ({"partition_by": ["a b"]}, "contains"),
        ({"table_properties": {"owner": "me"}}, "reserved by Spark"),
        ({"spark_submit_options": {"application": "evil.py"}}, "unsupported keys"),
    ],
)
def test_bad_arguments_fail_at_dag_parse_time(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        make(**kwargs)


def test_templated_values_are_checked_later():
    op = make(target_table="db.t_{{ ds_nodash }}", partition_by="{{ params.cols }}")
    assert op.target_table == "db.t_{{ ds_nodash }}"


def test_template_fields_match_spark_sql_operator_conventions():
    assert AtomicCtasOperator.template_ext == (".sql",)
    assert {"sql", "target_table", "partition_by", "table_properties", "conf"} <= set(
        AtomicCtasOperator.template_fields
    )
    assert make(partition_by="country").partition_by == ["country"]


def test_superseded_retention_is_validated_at_parse_time():
    import datetime

    from airflow_provider_ctas.catalogs.session_catalog.table import validate_retention

    assert validate_retention(datetime.timedelta(hours=2)) == 7200
    assert validate_retention(0) == 0
    for bad in (-1, "1h", True, 400 * 86400):
        with pytest.raises(InvalidInputError, match="superseded_retention"):
            validate_retention(bad)
