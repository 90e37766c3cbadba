"""A partitioned fact table that backfills safely: each logical date rebuilds its own `ds` partition.

`overwrite_partitions` switches the partitions a run produces from old to new data one metastore
operation each; readers of a date see all old or all new rows, and other dates are untouched. So
many dates can run at once, and re-running a date (`airflow backfill create ...
--reprocess-behavior completed`, or clearing its task) replaces that date atomically:

    airflow backfill create --dag-id example_partitioned_backfill \\
        --from-date 2024-01-01 --to-date 2024-01-14 --max-active-runs 4

Parallel runs need a metastore service, not Spark's embedded Derby (README: a realistic local stack).

Each run announces the partition it published as an asset event with that partition's key, so
`example_orders_report` runs once per date that changed, and never for a failed run.
"""

from __future__ import annotations

import datetime

import pendulum
from airflow.providers.apache.spark.operators.spark_sql import SparkSqlOperator
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_provider_ctas.operators import AtomicCtasOperator

with DAG(
    dag_id="example_partitioned_backfill",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=4,
    tags=["example", "atomic-ctas"],
) as dag:
    create_database = SparkSqlOperator(
        task_id="create_database", sql="CREATE DATABASE IF NOT EXISTS analytics", master="local[1]"
    )

    orders_by_day = AtomicCtasOperator(
        task_id="orders_by_day",
        target_table="analytics.orders_by_day",
        mode="overwrite_partitions",
        partition_by=["ds"],
        sql="""
            SELECT id AS order_id,
                   id % 100 AS customer_id,
                   CAST(id % 997 AS DOUBLE) / 10 AS amount,
                   CAST('{{ ds }}' AS STRING) AS ds
            FROM range(1000 + {{ logical_date.day }})
        """,
        table_properties={"team": "data-eng"},
        # First use: parallel runs race to create the table; a loser switches its partition into the
        # winner's table in the same try. Retries are for what Spark itself may fail on.
        retries=2,
        retry_delay=datetime.timedelta(seconds=30),
    )

    create_database >> orders_by_day


with DAG(
    dag_id="example_orders_report",
    # The table's asset (hive://<metastore>/analytics/orders_by_day); the identity mapper passes each
    # published partition key (the `ds` value) on as this DAG run's partition key.
    schedule=PartitionedAssetTimetable(assets=orders_by_day.outlets[0]),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example", "atomic-ctas"],
):

    @task
    def report(dag_run=None) -> str:
        return f"orders_by_day for {dag_run.partition_key} was published"

    report()
