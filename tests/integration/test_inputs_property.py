"""Property-based: random names, partition values and table properties, through the real phases.

For every generated input: either validation refuses it with a clear error before any Spark work,
or the phases (run in the test's own Spark session against the shared metastore) create exactly
the table asked for, with exactly the properties and partition values asked for, and no other
table in the database changes.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import quote, sql_string_literal
from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseReport, PhaseRequest
from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import fresh, properties
from tests.support.phases import QuietReporter

pytestmark = pytest.mark.integration

# Mostly valid-looking names, with the characters an injection would need mixed in.
NAME_CHARS = st.sampled_from(list("abcXYZ019_") + list(" ;`'\".-/*()=\\\n\t$é"))
NAMES = st.text(NAME_CHARS, min_size=0, max_size=10)
VALUES = st.text(min_size=1, max_size=30)


def tables(spark, database: str) -> set[str]:
    return {row["tableName"] for row in fresh(spark).sql(f"SHOW TABLES IN {database}").collect()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    table=NAMES,
    partition=NAMES,
    props=st.dictionaries(NAMES, VALUES, max_size=3),
    partition_values=st.lists(VALUES, min_size=1, max_size=3),
)
def test_random_inputs_are_refused_or_create_exactly_that_table(
    spark, database, table, partition, props, partition_values
):
    before = tables(spark, database)
    key = TransactionKey("property_dag", "ctas", f"run_{uuid.uuid4().hex}")
    try:
        txn = create_two_phase_table(
            key=key,
            conn_id="spark_default",
            target=f"{database}.{table}",
            mode="create",
            table_format="parquet",
            partition_by=[partition],
            table_properties=props,
        )
    except InvalidInputError as exc:
        refusal = str(exc)
        assert refusal, "a refusal says what is wrong"
        assert tables(spark, database) == before
        return
    assert isinstance(txn, SessionCatalogTable)
    column = txn.partition_by[0]
    rows = ", ".join(f"({i}, {sql_string_literal(value)})" for i, value in enumerate(partition_values))
    sql = f"SELECT * FROM VALUES {rows} AS v(id, {quote(column)})"
    txn.begin(1, "2024-01-01T00:00:00+00:00")
    request = PhaseRequest(phases=RUN_PHASES, table=txn.to_dict(), sql=sql)
    executor = SessionCatalogExecutor(spark, txn, request, QuietReporter())
    for phase in RUN_PHASES:
        executor.run(phase, PhaseReport(phase, "ok", 0.0))
    try:
        assert executor.published
        assert tables(spark, database) == before | {txn.target.table}
        stored = properties(spark, txn.target.quoted)
        assert {k: stored.get(k) for k in props} == {k: str(v) for k, v in props.items()}
        read_back = {row[column] for row in fresh(spark).table(txn.target.quoted).collect()}
        # Spark stores an empty partition value as NULL (__HIVE_DEFAULT_PARTITION__).
        assert read_back == {value if value != "" else None for value in partition_values}
    finally:
        fresh(spark).sql(f"DROP TABLE IF EXISTS {txn.target.quoted} PURGE")
