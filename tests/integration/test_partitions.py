"""overwrite_partitions: each partition a run produces switches atomically; the others stay."""

from __future__ import annotations

import json
import threading
import time

import pytest

from airflow_provider_ctas.core import markers
from ctas_devstack.fault_proxy import FaultProxy
from tests.support.catalog import (
    comments,
    count,
    database_dir,
    fresh,
    leftovers,
    partition_locations,
    properties,
    retained_until,
)
from tests.support.dags import make_dag, run_dag, xcom_value
from tests.support.faults import Reader, check_observations
from tests.support.fixtures import CONNECT_CONN_ID
from tests.support.processes import wait_for_line

pytestmark = pytest.mark.integration


def day_sql(ds: str, rows: int, version: str) -> str:
    return f"SELECT id, '{version}' AS version, '{ds}' AS ds FROM range({rows})"


def run(dag_id: str, target: str, sql: str, **kwargs):
    dag = make_dag(dag_id, target_table=target, mode="overwrite_partitions", partition_by=["ds"], sql=sql, **kwargs)
    result = run_dag(dag)
    return result, xcom_value(dag_id, result.run_id, "ctas_transaction")


def test_partitions_switch_one_by_one_and_the_rest_stay(stack, spark, database, monkeypatch):
    target = f"{database}.events"
    first, txn = run("parts_day1", target, day_sql("2024-01-01", 100, "v1"),
                     column_comments={"ds": "the day", "version": "v"})  # fmt: skip
    assert first.task_state == "success" and txn["details"]["publish"]["mechanism"] == "rename"
    second, txn = run("parts_day2", target, day_sql("2024-01-02", 50, "v1"))
    assert second.task_state == "success" and txn["details"]["publish"]["partitions"] == ["ds=2024-01-02"]
    before = partition_locations(spark, target)

    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"after_prepare": {"sleep": 3}}))
    reader = Reader(spark, target, where="ds = '2024-01-01'").start()
    again, txn = run(
        "parts_day1_again",
        target,
        day_sql("2024-01-01", 130, "v2"),
        table_properties={"team": "x"},
        comment="events by day",
        column_comments={"version": "which", "ds": "the day"},  # the partition column's, unchanged
    )
    values = reader.stop()

    assert again.task_state == "success"
    assert check_observations(values, {100, 130}, 130) is None, values
    assert values.count(100) > 3, "the reader watched the old partition while the job ran"
    after = partition_locations(spark, target)
    assert after["ds=2024-01-02"] == before["ds=2024-01-02"], "a partition the run did not produce is untouched"
    assert after["ds=2024-01-01"] != before["ds=2024-01-01"]
    assert count(spark, target, "ds = '2024-01-02'") == 50
    assert {r["version"] for r in fresh(spark).table(target).where("ds = '2024-01-01'").collect()} == {"v2"}
    assert properties(spark, target)["team"] == "x"
    assert comments(spark, target) == ("events by day", {"version": "which", "ds": "the day"})
    from pathlib import Path
    from urllib.parse import urlparse

    # Kept, so a reader that listed it just before the switch still reads it. With
    # superseded_retention=0 it goes at once and such a reader may fail (README): the test of
    # escaped partition values below checks that deletion.
    assert retained_until(Path(urlparse(before["ds=2024-01-01"]).path)) is not None, "the old partition, kept"
    assert leftovers(spark, database) == []


def test_schema_drift_is_refused_before_any_job(stack, spark, database):
    target = f"{database}.drift"
    spark.sql(f"CREATE TABLE {target} (id BIGINT, ds STRING COMMENT 'the day') USING parquet PARTITIONED BY (ds)")
    spark.sql(f"INSERT INTO {target} VALUES (1, '2024-01-01')")
    result, txn = run("parts_drift", target, "SELECT id, 'oops' AS extra, '2024-01-01' AS ds FROM range(5)")
    assert result.task_state == "failed"
    assert txn["details"]["error"]["code"] == "QUERY_ERROR"
    assert "schema drift" in txn["details"]["error"]["message"] and "extra" in txn["details"]["error"]["message"]
    assert txn["details"]["spark_jobs"] == 0
    # Spark cannot change a partition column's comment on an existing file-format table: refused in begin.
    result, txn = run("parts_recomment", target, "SELECT id, '2024-01-01' AS ds FROM range(5)",
                      column_comments={"ds": "renamed"})  # fmt: skip
    assert result.task_state == "failed" and txn["details"]["error"]["code"] == "UNSUPPORTED_TARGET", txn
    assert "partition column(s) ['ds']" in txn["details"]["error"]["message"]
    assert txn["details"]["spark_jobs"] == 0
    assert count(spark, target) == 1 and comments(spark, target) == (None, {"ds": "the day"})
    assert leftovers(spark, database) == []


def test_foreign_partition_data_is_kept_and_a_failed_publish_switches_back(stack, spark, database, monkeypatch):
    target = f"{database}.foreign_parts"
    spark.sql(f"CREATE TABLE {target} (id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)")
    spark.sql(f"INSERT INTO {target} SELECT id, IF(id < 10, '2024-01-01', '2024-01-02') FROM range(30)")
    before = partition_locations(spark, target)
    two_days = "SELECT id, IF(id < 5, '2024-01-01', '2024-01-02') AS ds FROM range(8)"

    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"publish_between_partitions": {"raise": "boom"}}))
    failed, txn = run("parts_fail", target, two_days)
    assert failed.task_state == "failed" and txn["details"]["error"]["code"] == "PUBLISH_FAILED"
    assert partition_locations(spark, target) == before, "the partition switched first was switched back"
    assert count(spark, target) == 30
    assert leftovers(spark, database) == []

    monkeypatch.delenv("AIRFLOW_CTAS_FAULTS")
    ok, txn = run("parts_ok", target, two_days)
    assert ok.task_state == "success"
    assert count(spark, target) == 8
    from pathlib import Path
    from urllib.parse import urlparse

    kept = txn["details"]["superseded_kept"]
    assert sorted(kept) == sorted(before.values()), "data this provider did not write is not deleted"
    assert all(Path(urlparse(location).path).exists() for location in kept)
    assert leftovers(spark, database) == []


def test_a_run_that_loses_the_first_use_race_switches_its_partitions_into_the_winners_table(
    stack, spark, database, tmp_path, monkeypatch
):
    """Two dates' first runs both stage a new table; the one whose rename loses publishes its
    partitions into the table the other created, in the same try, without writing them again."""
    target = f"{database}.first_use_race"
    progress, go = tmp_path / "progress", tmp_path / "go"

    def win_the_race() -> None:
        wait_for_line(progress, "before_publish try=1", timeout=240)  # staged, about to rename
        fresh(spark).sql(
            f"CREATE TABLE {target} USING parquet PARTITIONED BY (ds) AS {day_sql('2024-01-01', 100, 'other')}"
        )
        go.touch()

    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(go)}}
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps(faults))
    winner = threading.Thread(target=win_the_race)
    winner.start()
    # A check of the result: it must see the rows the other run published, not only this run's.
    checks = [{"type": "row_count", "min": 1, "scope": "result"}]
    result, txn = run("first_use_race", target, day_sql("2024-01-02", 50, "v1"), checks=checks)
    winner.join()

    assert result.task_state == "success" and result.try_number == 1, txn["details"].get("error")
    assert txn["details"]["publish"]["mechanism"] == "partitions"
    assert txn["details"]["publish"]["partitions"] == ["ds=2024-01-02"]
    assert txn["details"]["checks"][0]["value"] == 150
    assert count(spark, target, "ds = '2024-01-01'") == 100 and count(spark, target, "ds = '2024-01-02'") == 50
    # The published partition reads the staging directory, which the staging table's drop kept.
    [staged] = [path for path in partition_locations(spark, target).values() if "__ctas_" in path]
    assert staged.endswith("/ds=2024-01-02")
    assert not list(database_dir(spark, database).rglob("_released")), "the released metadata's directory is dropped"
    assert leftovers(spark, database) == []


def test_a_run_that_begins_inside_a_concurrent_first_publish_waits_for_it(
    stack, spark, database, tmp_path, monkeypatch
):
    """Parallel first runs: the metastore moves the winner's directory into place before it commits
    the rename. A run that begins in that instant must see a table being created, not a leftover."""
    target = f"{database}.first_use"
    root = database_dir(spark, database) / "first_use"
    root.mkdir()
    other = markers.MarkerFile("f" * 32, 1, f"spark_catalog.{target}", "2024-01-01T00:00:00+00:00")
    (root / markers.MARKER_FILE).write_text(other.to_json())

    def commit_the_rename() -> None:
        wait_for_line(progress, "concurrent_creator try=1", timeout=240)  # the run saw the directory
        time.sleep(2)
        spark.sql(
            f"CREATE TABLE {target} (id BIGINT, version STRING, ds STRING) USING parquet PARTITIONED BY (ds) "
            f"LOCATION '{root}'"
        )

    progress = tmp_path / "progress"
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"progress_file": str(progress), "concurrent_creator": {}}))
    winner = threading.Thread(target=commit_the_rename)
    winner.start()
    result, txn = run("first_use_late", target, day_sql("2024-01-02", 50, "v1"))
    winner.join()

    assert result.task_state == "success" and result.try_number == 1, txn["details"].get("error")
    assert txn["details"]["publish"]["mechanism"] == "partitions"
    assert count(spark, target, "ds = '2024-01-02'") == 50
    assert leftovers(spark, database) == []


@pytest.mark.parametrize("runner", ["spark_submit", "connect"])
def test_partition_values_that_paths_escape_switch_in_from_a_staging_directory(stack, spark, database, runner, request):
    """Staging that is only a directory names its partitions by path (``ds=a%2Fb``); the values the
    table lists must be the query's, the null one included, on the first run and when replaced.
    Over Spark Connect the directory is listed by the server (a ``binaryFile`` read)."""
    options = {}
    if runner == "connect":
        request.getfixturevalue("connect_server")
        options["conn_id"] = CONNECT_CONN_ID
    target = f"{database}.odd_values"
    values = ["a/b", "x=y", "100%", "2024-01-01 10:00:00", "ü é", "#?:*", None]
    literals = ", ".join("NULL" if v is None else "'" + v + "'" for v in values)
    pick = f"element_at(array({literals}), CAST(id % {len(values)} AS INT) + 1)"
    sql = f"SELECT id, '{{v}}' AS version, {pick} AS ds FROM range(70)"
    expected = sorted((i, values[i % len(values)]) for i in range(70))

    first, _ = run(f"odd_v1_{runner}", target, sql.format(v="v1"), **options)
    assert first.task_state == "success"
    again, txn = run(f"odd_v2_{runner}", target, sql.format(v="v2"), superseded_retention=0, **options)
    assert again.task_state == "success", txn["details"].get("error")
    assert txn["details"]["publish"]["mechanism"] == "partitions"
    assert "staging_table" not in txn["details"], "a partition switch registers no staging table"
    assert len(txn["details"]["publish"]["partitions"]) == len(values)

    rows = fresh(spark).table(target).collect()
    assert sorted((r["id"], r["ds"]) for r in rows) == expected
    assert {r["version"] for r in rows} == {"v2"}
    assert len(fresh(spark).sql(f"SHOW PARTITIONS {target}").collect()) == len(values), "none was added twice"
    table_dir = database_dir(spark, database) / "odd_values"
    old_versions = [p for p in table_dir.iterdir() if p.is_dir() and not p.name.startswith("_")]  # not a marker
    assert old_versions == [], "the first run's partitions are superseded and deleted (retention 0)"
    assert leftovers(spark, database) == []


def test_any_number_of_partitions_switch_in_at_most_two_metastore_calls(stack, spark, database, metastore):
    """README: the partitions a run produces switch with at most two metastore calls, new ones in one
    ``add_partitions`` and existing ones in one ``alter_partitions``, counted where the metastore
    receives them (the dev stack's proxy in front of it): 12 partitions, 6 of them replacing."""
    target = f"{database}.many"
    seed = "SELECT id, CAST(id % 6 AS STRING) AS k FROM range(60)"
    fresh(spark).sql(f"CREATE TABLE {target} USING parquet PARTITIONED BY (k) AS {seed}")
    proxy = FaultProxy(("127.0.0.1", metastore.port)).start()
    try:
        conf = {"spark.hadoop.hive.metastore.uris": f"thrift://127.0.0.1:{proxy.port}"}
        sql = "SELECT id, CAST(id % 12 AS STRING) AS k FROM range(120)"
        dag = make_dag("many_partitions", target_table=target, mode="overwrite_partitions", partition_by=["k"], sql=sql,
                       conf=conf)  # fmt: skip
        run_ = run_dag(dag)
    finally:
        proxy.stop()

    assert run_.task_state == "success"
    txn = xcom_value("many_partitions", run_.run_id, "ctas_transaction")
    assert len(txn["details"]["publish"]["partitions"]) == 12
    assert count(spark, target) == 120
    assert proxy.calls["get_table"] > 0, "the driver's calls went through the proxy"
    changes = {method: n for method, n in proxy.calls.items() if "partition" in method and not method.startswith("get")}
    assert changes == {"add_partitions_req": 1, "alter_partitions": 1}, proxy.calls
    assert leftovers(spark, database) == []
