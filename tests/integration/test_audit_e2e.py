"""Audit before publish end to end: a DAG (checks in dict form, templated), a concurrent reader,
over spark-submit and over Spark Connect."""

from __future__ import annotations

import json

import pytest

from tests.support.catalog import count, fresh, leftovers, partition_locations
from tests.support.dags import make_dag, run_dag, xcom_value
from tests.support.faults import Reader, check_observations
from tests.support.fixtures import CONNECT_CONN_ID

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_failed_audit_on_replace_keeps_the_old_version_for_every_reader(stack, spark, database, monkeypatch):
    target = f"{database}.customers"
    fresh(spark).sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 'x' AS email FROM range(300)")
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"after_audit": {"sleep": 2}}))
    dag = make_dag(
        "audit_fails_replace",
        retries=1,
        target_table=target,
        mode="replace",
        sql="SELECT id, IF(id % 100 = 7, NULL, 'x') AS email FROM range(400)",
        checks=[
            {"type": "row_count", "min": 1},
            {"type": "not_null", "columns": ["email"]},
            {"type": "sql", "name": "shrinks", "sql": "SELECT 1 FROM {{ staged }} HAVING count(1) < 10"},
        ],
    )
    reader = Reader(spark, target, interval=0.1).start()
    run = run_dag(dag)
    values = reader.stop()

    # AUDIT_FAILED is not retried: the same data fails the same checks again.
    assert (run.task_state, run.try_number) == ("failed", 1)
    assert check_observations(values, {300}, 300) is None, values
    txn = xcom_value("audit_fails_replace", run.run_id, "ctas_transaction")
    assert txn["state"] == "aborted"
    assert txn["details"]["error"]["code"] == "AUDIT_FAILED"
    results = {c["name"]: c for c in txn["details"]["checks"]}
    assert [name for name, c in results.items() if not c["passed"]] == ["not_null(email)"]
    assert results["not_null(email)"]["value"] == 4
    assert {row["id"] for row in results["not_null(email)"]["sample"]} == {"7", "107", "207", "307"}
    assert count(spark, target) == 300
    assert leftovers(spark, database) == []


def test_a_passing_audit_over_connect_switches_partitions_and_records_the_results(
    stack, connect_server, spark, database
):
    target = f"{database}.events"
    fresh(spark).sql(
        f"CREATE TABLE {target} USING parquet PARTITIONED BY (ds) AS "
        "SELECT id, IF(id < 100, '2024-01-01', '2024-01-02') AS ds FROM range(200)"
    )
    dag = make_dag(
        "audit_passes_connect",
        target_table=target,
        mode="overwrite_partitions",
        partition_by=["ds"],
        conn_id=CONNECT_CONN_ID,
        sql="SELECT id + 1000 AS id, '2024-01-02' AS ds FROM range(150)",
        checks=[
            {"type": "unique", "columns": ["id"], "scope": "result"},
            {"type": "row_count_change", "min_ratio": 0.5, "max_ratio": 2},
            {"type": "sql", "name": "only my day", "sql": "SELECT * FROM {{ staged }} WHERE ds <> '2024-01-02'"},
            {"type": "value_range", "column": "id", "min": 1000, "max": 1149},
        ],
    )
    run = run_dag(dag)

    assert run.task_state == "success", run
    txn = xcom_value("audit_passes_connect", run.run_id, "ctas_transaction")
    assert txn["outcome"] == "published"
    results = {c["name"]: (c["passed"], c["value"]) for c in txn["details"]["checks"]}
    assert results == {
        "unique(id)": (True, 0),
        "row_count_change": (True, 1.5),
        "only my day": (True, 0),
        "value_range(id)": (True, 0),
    }
    # Over Connect too the write's observed metrics reach the driver: only the distinct count and
    # the SQL check ran as queries after the write.
    measured = [c["name"] for c in txn["details"]["checks"] if c["note"].endswith("measured by the write")]
    assert measured == ["row_count_change", "value_range(id)"]
    assert [p["phase"] for p in txn["details"]["phases"]] == ["begin", "prepare", "audit", "commit"]
    assert count(spark, target, "ds = '2024-01-02'") == 150
    assert count(spark, target, "ds = '2024-01-01'") == 100
    assert "__ctas_" in partition_locations(spark, target)["ds=2024-01-02"]
    assert leftovers(spark, database) == []
