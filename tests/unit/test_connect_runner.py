"""Which runner a connection gets, and the Connect runner's session ids (its fencing handle)."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.runners.spark_connect import SparkConnectRunner, session_id
from airflow_provider_ctas.runners.spark_submit import SparkSubmitRunner


def test_session_ids_are_per_try_and_reproducible():
    first, second = session_id("a" * 32, 1), session_id("a" * 32, 2)
    assert first == session_id("a" * 32, 1), "any later process must find try 1's session"
    assert first != second != session_id("b" * 32, 2)
    assert str(uuid.UUID(first)) == first


@pytest.fixture
def connections(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_UNIT_CONNECT", json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1"}))
    monkeypatch.setenv("AIRFLOW_CONN_UNIT_SUBMIT", json.dumps({"conn_type": "spark", "host": "local[1]"}))


def test_the_connection_type_picks_the_runner(connections):
    connect = AtomicCtasOperator(task_id="a", sql="SELECT 1 AS x", target_table="db.t", conn_id="unit_connect")
    submit = AtomicCtasOperator(task_id="b", sql="SELECT 1 AS x", target_table="db.t", conn_id="unit_submit")
    assert isinstance(connect._new_runner(), SparkConnectRunner)
    assert isinstance(submit._new_runner(), SparkSubmitRunner)


def test_spark_submit_options_are_refused_for_a_connect_connection(connections):
    operator = AtomicCtasOperator(
        task_id="a",
        sql="SELECT 1 AS x",
        target_table="db.t",
        conn_id="unit_connect",
        spark_submit_options={"driver_memory": "2g"},
    )
    with pytest.raises(InvalidInputError, match="Spark Connect connection"):
        operator._new_runner()


def test_connect_mode_does_not_leak_into_later_sessions_or_children(monkeypatch):
    """pyspark sets SPARK_CONNECT_MODE_ENABLED for a Connect session; a later spark-submit driver
    inheriting it fails with CONNECT_URL_NOT_SET (seen in CI), so the runner puts it back."""
    from airflow_provider_ctas.runners import spark_connect

    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    monkeypatch.setenv("SPARK_REMOTE", "sc://kept")
    with spark_connect.connect_mode_confined():
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        os.environ["SPARK_REMOTE"] = "sc://changed"
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    assert os.environ["SPARK_REMOTE"] == "sc://kept"
