"""Publish a mart's facts and dimensions together: both tables change in one catalog commit, or
neither does. Needs Iceberg tables on a REST catalog (the URL below) that already exist, and the
Iceberg Spark runtime jar on the Spark side; each member audits its own table before the publish.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_ctas.checks import NotNull, Unique
from airflow_provider_ctas.operators import AtomicCtasOperator, PublishGroupOperator

CONF = {
    "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    "spark.sql.catalog.lake.type": "rest",
    "spark.sql.catalog.lake.uri": "http://iceberg-rest.example:8181/",
}

with DAG(
    dag_id="example_publish_group",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example", "atomic-ctas"],
) as dag:
    facts = AtomicCtasOperator(
        task_id="facts",
        sql="SELECT order_id, customer_id, amount FROM lake.raw.orders WHERE ds = '{{ ds }}'",
        target_table="lake.mart.facts",
        mode="replace",
        table_format="iceberg",
        conf=CONF,
        publish_group="publish_mart",
        checks=[NotNull("order_id"), Unique("order_id")],
    )
    dims = AtomicCtasOperator(
        task_id="dims",
        sql="SELECT customer_id, name, segment FROM lake.raw.customers",
        target_table="lake.mart.dims",
        mode="replace",
        table_format="iceberg",
        conf=CONF,
        publish_group="publish_mart",
    )
    [facts, dims] >> PublishGroupOperator(task_id="publish_mart")
