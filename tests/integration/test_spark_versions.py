"""The compatibility matrix beyond the main environment's Spark 4.3: each release's own spark-submit,
jars and Python (``tests/support/spark_versions.py``) run the driver against this session's
metastore service, through the real operator.

Spark 3.5 (Scala 2.12) and 4.0: the lifecycle smoke (create by rename, same-shape replace by a
location flip, overwrite_partitions by a partition switch). Spark 3.5, the oldest and most different:
one fault cell (the driver SIGKILLed mid-write: the next try publishes, nothing is left).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import count, database_dir, leftovers, properties, table_exists
from tests.support.dags import DAGS_FOLDER, make_dag, run_dag, xcom_value
from tests.support.faults import Trial, wait_for_drivers_to_exit, wait_for_path
from tests.support.processes import kill_spark_driver
from tests.support.spark_versions import on_release

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.versions]

SPARK_40 = "4.0.5"
SPARK_35 = "3.5.6"


def _published_by(dag_id: str, run_id: str) -> dict:
    value = xcom_value(dag_id, run_id, "ctas_transaction")
    assert value is not None
    return value


# 4.1.4 runs the Iceberg strategy's tests (test_iceberg.py), through the same driver entry point.
@pytest.mark.parametrize("version", [SPARK_35, SPARK_40])
def test_lifecycle_on_another_spark(version, stack, spark, database, monkeypatch):
    env, conf = on_release(version)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    created, flipped, parts = f"{database}.created", f"{database}.flipped", f"{database}.parts"
    spark.sql(f"CREATE TABLE {flipped} USING parquet AS SELECT id FROM range(5)")
    spark.sql(f"CREATE TABLE {parts} USING parquet PARTITIONED BY (k) AS SELECT id, CAST(id % 3 AS STRING) AS k "
              "FROM range(30)")  # fmt: skip

    tag = version.replace(".", "_")
    runs: dict[str, dict[str, Any]] = {
        f"create_{tag}": dict(target_table=created, sql="SELECT id, id % 7 AS k FROM range(700)"),
        f"flip_{tag}": dict(target_table=flipped, sql="SELECT id FROM range(50)", mode="replace"),
        f"parts_{tag}": dict(target_table=parts, sql="SELECT id, '1' AS k FROM range(4)", mode="overwrite_partitions",
                          partition_by=["k"]),
    }  # fmt: skip
    mechanisms = {}
    for dag_id, kwargs in runs.items():
        run = run_dag(make_dag(dag_id, conf=conf, **kwargs))
        assert run.task_state == "success", dag_id
        details = _published_by(dag_id, run.run_id)["details"]
        assert details["spark_application"]["version"] == version, "the driver ran that release"
        mechanisms[dag_id] = details["publish"]["mechanism"]
    assert list(mechanisms.values()) == ["rename", "flip", "partitions"]
    assert count(spark, created) == 700 and count(spark, flipped) == 50
    assert count(spark, parts) == 20 + 4 and count(spark, parts, "k = '1'") == 4
    assert properties(spark, created)["airflow_ctas.dag_id"] == f"create_{tag}"
    assert leftovers(spark, database) == []


def test_spark_3_5_driver_killed_mid_write_leaves_nothing_and_the_retry_publishes(stack, spark, database, tmp_path):
    env, conf = on_release(SPARK_35)
    target, dag_id, run_id = f"{database}.killed", "v35_kill", "v35_kill_run"
    slow = "reflect('java.lang.Thread', 'sleep', CAST({{ 60 if ti.try_number == 1 else 0 }} AS BIGINT))"
    make_dag(
        dag_id, retries=1, target_table=target, sql=f"SELECT id, {slow} AS pause FROM range(0, 400, 1, 4)", conf=conf
    )
    txn_id = TransactionKey(dag_id, "ctas", run_id).txn_id
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try1.log", env=env).start()
    wait_for_path(database_dir(spark, database) / f"__ctas_{txn_id[:16]}_s1" / "_temporary", timeout=240)
    time.sleep(1)
    assert kill_spark_driver(f"{target} try 1")
    assert first.wait() != "success"
    wait_for_drivers_to_exit(target)
    assert not table_exists(spark, target), "a killed try publishes nothing"

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try2.log", env=env).start().wait()
    assert second == "success"
    assert count(spark, target) == 400
    assert leftovers(spark, database) == []
    assert _published_by(dag_id, run_id)["details"]["spark_application"]["version"] == SPARK_35
