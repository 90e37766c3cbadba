"""Rebuild a dimension table every day; readers keep the old version until the new one is complete.

Same columns every day, so each run publishes with a single location flip (no window). The checks
audit the new version before it is published (write-audit-publish): if one fails, readers keep
yesterday's table and the task fails with AUDIT_FAILED. Runs on the embedded default like
example_atomic_ctas.
"""

from __future__ import annotations

import pendulum
from airflow.providers.apache.spark.operators.spark_sql import SparkSqlOperator
from airflow.sdk import DAG

from airflow_provider_ctas.checks import AcceptedValues, NotNull, RowCount, RowCountChange, SqlCheck, Unique
from airflow_provider_ctas.operators import AtomicCtasOperator

with DAG(
    dag_id="example_replace_dimension",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example", "atomic-ctas"],
) as dag:
    create_database = SparkSqlOperator(
        task_id="create_database", sql="CREATE DATABASE IF NOT EXISTS analytics", master="local[1]"
    )

    dim_customer = AtomicCtasOperator(
        task_id="dim_customer",
        target_table="analytics.dim_customer",
        mode="replace",
        sql="""
            SELECT CAST(id AS INT) AS customer_id,
                   concat('customer-', CAST(id AS STRING)) AS name,
                   element_at(array('bronze', 'silver', 'gold'), CAST(id % 3 AS INT) + 1) AS tier,
                   CAST('{{ ds }}' AS DATE) AS valid_from
            FROM range(97)
        """,
        table_properties={"team": "data-eng", "refreshed_for": "{{ ds }}"},
        # Kept across every replace, with any comment set on the table by hand.
        comment="One row per customer, rebuilt daily",
        column_comments={"tier": "bronze, silver or gold"},
        checks=[
            RowCount(min=1),
            NotNull("customer_id", "name"),
            Unique("customer_id"),
            AcceptedValues(column="tier", values=["bronze", "silver", "gold"]),
            RowCountChange(min_ratio=0.9),  # no more than 10 % of customers lost since the published version
            SqlCheck(
                name="no customer disappears",
                sql="SELECT customer_id FROM {{ published }} EXCEPT SELECT customer_id FROM {{ staged }}",
            ),
        ],
        retries=2,
    )

    create_database >> dim_customer
