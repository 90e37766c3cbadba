"""Nightly garbage collection of staging that killed or crashed tasks left behind.

Only objects carrying this provider's markers, older than ``min_age``, whose task instance Airflow
does not report as active and that no table reads from are removed; the report lands in XCom.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_provider_ctas.operators import AtomicCtasGcOperator

with DAG(
    dag_id="example_maintenance_gc",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example", "atomic-ctas", "maintenance"],
) as dag:
    AtomicCtasGcOperator(task_id="collect_garbage", databases=["analytics"], min_age=timedelta(hours=24))
