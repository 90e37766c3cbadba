"""The task's "Spark application" link: the History Server's page when the driver has one, which
outlives the application, else the live UI."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.transaction import TransactionKey, TwoPhaseTable
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.operators.links import SparkApplicationLink
from airflow_provider_ctas.spark.engine import history_url

APP = "app-20261127141500-0003"


@pytest.mark.parametrize(
    ("address", "event_log", "expected"),
    [
        ("history.example:18080", "true", f"http://history.example:18080/history/{APP}/jobs/"),
        ("https://history.example/", "TRUE", f"https://history.example/history/{APP}/jobs/"),
        ("history.example:18080", None, None),  # no event log: the server never sees the application
        ("history.example:18080", "false", None),
        (None, "true", None),
        ("${hadoopconf-yarn.resourcemanager.hostname}:18080", "true", None),  # only YARN resolves it
    ],
)
def test_the_history_server_page_needs_an_address_and_event_logs(address, event_log, expected):
    assert history_url(address, event_log, APP) == expected


def _operator_with(application: dict[str, Any]) -> AtomicCtasOperator:
    op = AtomicCtasOperator(task_id="t", sql="SELECT 1", target_table="db.t")
    table = TwoPhaseTable(key=TransactionKey("d", "t", "r"), target=TableRef.parse("db.t"), conn_id="spark_default")
    table.details["spark_application"] = application
    op._txn = table
    return op


def test_the_link_prefers_the_history_server_and_falls_back_to_the_live_ui():
    live = {"id": APP, "ui": "http://worker-1:4040"}
    history = {**live, "history": f"http://history.example:18080/history/{APP}/jobs/"}
    assert SparkApplicationLink().get_link(_operator_with(history), ti_key=None) == history["history"]
    assert SparkApplicationLink().get_link(_operator_with(live), ti_key=None) == "http://worker-1:4040"
    assert SparkApplicationLink().get_link(_operator_with({}), ti_key=None) == ""
