"""Daily snapshot: build one table per logical date, atomically, then report what was published.

Runs on the embedded default (local Spark, Spark's embedded Derby metastore): see README.md.
"""

from __future__ import annotations

import pendulum
from airflow.providers.apache.spark.operators.spark_sql import SparkSqlOperator
from airflow.sdk import DAG, task

from airflow_provider_ctas.operators import XCOM_KEY, AtomicCtasOperator

with DAG(
    dag_id="example_atomic_ctas",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    template_searchpath=[__file__.rsplit("/", 1)[0]],
    tags=["example", "atomic-ctas"],
) as dag:
    create_database = SparkSqlOperator(
        task_id="create_database",
        sql="CREATE DATABASE IF NOT EXISTS analytics",
        master="local[1]",
    )

    daily_orders = AtomicCtasOperator(
        task_id="daily_orders",
        target_table="analytics.daily_orders_{{ ds_nodash }}",
        sql="sql/daily_orders.sql",
        mode="create",
        partition_by=["country"],
        table_format="parquet",
        table_properties={"team": "data-eng"},
        conn_id="spark_default",
        retries=2,
    )

    @task
    def report(published: dict, **context) -> str:
        """A downstream task learns the published table and its row count from XCom."""
        transaction = context["ti"].xcom_pull(task_ids="daily_orders", key=XCOM_KEY)
        line = (
            f"published {published['target']}: {published['row_count']} rows "
            f"({published['outcome']} by try {published['try_number']}, "
            f"{transaction['details']['publish']['mechanism']} in {transaction['details']['publish']['seconds']}s)"
        )
        print(line)
        return line

    create_database >> daily_orders
    report(daily_orders.output)
