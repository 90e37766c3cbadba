"""The Iceberg strategy on a REST catalog: the Iceberg project's own ``RESTCatalogServer`` (started
by ``ctas_devstack/iceberg_rest.py``, its state in a SQLite file), through the real operator, its
driver on Spark 4.1 with the 1.11 runtime. An independent reader (its own Spark 4.1 JVM) checks the
tables through the same server.

A REST commit checks only the requirements it carries (refs, schema, spec), never table
properties; these tests prove the fence still holds there, where the Hive catalog's whole-metadata
compare-and-swap is not available.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from airflow_provider_ctas.core import markers
from ctas_devstack.fault_proxy import LOSE_MODES, FaultProxy
from ctas_devstack.iceberg_rest import IcebergRestCatalog
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import Trial, check_observations, summarize
from tests.support.fixtures import STOP_GRACE
from tests.support.format_scenarios import (
    FormatProbe,
    assert_zombie_fenced,
    kill_mid_write_then_after_publish,
    record_format_cell,
    zombie_in_publish_window,
)
from tests.support.iceberg import iceberg_ctas, leftovers, probe
from tests.support.processes import wait_for_line
from tests.support.table_reader import TablePoller, TableReader

# One test worker runs the whole module: its module-scoped services start once, not on every worker.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.formats, pytest.mark.xdist_group("iceberg_rest")]

CATALOG = "lake"
NAMESPACE = "analytics"
TRY_SQL = "SELECT id, CAST({{ ti.try_number }} AS BIGINT) AS written_by_try FROM range(100)"


@pytest.fixture
def reader(rest_reader: TableReader) -> TableReader:
    rest_reader.rows(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    return rest_reader


def _leftovers(reader: TableReader, table: str) -> list[str]:
    return leftovers(reader, f"{CATALOG}.{NAMESPACE}", table)


def _probe(reader: TableReader, target: str) -> FormatProbe:
    return probe("iceberg-rest", reader, f"{CATALOG}.{NAMESPACE}", target)


def test_rest_catalog_create_replace_overwrite_and_audit(stack, rest, reader, on_rest):
    target = f"{CATALOG}.{NAMESPACE}.events"
    state, txn = iceberg_ctas("rest_create", on_rest, target_table=target, mode="create", partition_by=["k"],
                       sql="SELECT id, id % 3 AS k FROM range(300)",
                       checks=[{"type": "unique", "columns": ["id"]}])  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert txn["details"]["metastore_uris"] == rest.uri, "lineage names the REST catalog"
    assert reader.value(f"SELECT count(*) FROM {target}") == 300
    assert reader.properties(target)[markers.ROW_COUNT] == "300"

    # A check that fails on the branch: main keeps its version; the branch and fence go.
    state, txn = iceberg_ctas("rest_audit_fails", on_rest, target_table=target, mode="replace",
                       sql="SELECT id, id % 3 AS k FROM range(10)",
                       checks=[{"type": "row_count_change", "min_ratio": 0.5}])  # fmt: skip
    assert state == "failed" and txn["details"]["error"]["code"] == "AUDIT_FAILED", txn
    assert reader.value(f"SELECT count(*) FROM {target}") == 300
    assert _leftovers(reader, target) == []

    state, txn = iceberg_ctas("rest_replace", on_rest, target_table=target, mode="replace",
                       sql="SELECT id, id % 3 AS k FROM range(60)")  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "branch"
    assert reader.value(f"SELECT count(*) FROM {target}") == 60
    assert _leftovers(reader, target) == []

    state, txn = iceberg_ctas("rest_partitions", on_rest, target_table=target, mode="overwrite_partitions",
                       partition_by=["k"], sql=f"SELECT id, 7 AS k FROM {target} WHERE id < 5")  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["inputs"] == [{"namespace": rest.uri, "name": f"{NAMESPACE}.events"}], "lineage input"
    assert txn["details"]["publish"]["partitions"] == ["k=7"]
    assert reader.rows(f"SELECT k, count(*) FROM {target} GROUP BY k ORDER BY k") == [[0, 20], [1, 20], [2, 20], [7, 5]]
    assert reader.properties(target)[markers.DAG_ID] == "rest_partitions"
    assert _leftovers(reader, target) == []

    # A replace that changes the shape: refused where a sort order the table had would no longer bind,
    # then made with a new column type and a partition transform, in one REST commit.
    reader.rows(f"ALTER TABLE {target} WRITE ORDERED BY k")
    state, txn = iceberg_ctas("rest_drops_sorted", on_rest, target_table=target, mode="replace",
                              sql="SELECT id FROM range(3)")  # fmt: skip
    assert state == "failed" and txn["details"]["error"]["code"] == "UNSUPPORTED_TARGET", txn
    assert "sort order on ['k']" in txn["details"]["error"]["message"]
    assert reader.value(f"SELECT count(*) FROM {target}") == 65
    assert _leftovers(reader, target) == []
    state, txn = iceberg_ctas("rest_reshape", on_rest, target_table=target, mode="replace",
                              partition_by=["bucket(4, id)"],
                              sql="SELECT CAST(id AS STRING) AS id, CAST(1 AS BIGINT) AS k FROM range(8)")  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "reshape"
    assert reader.rows(f"SELECT typeof(id), count(*) FROM {target} GROUP BY 1") == [["string", 8]]
    assert [r[1] for r in reader.rows(f"DESCRIBE TABLE {target}") if str(r[0]).startswith("Part ")] == ["bucket(4, id)"]
    assert _leftovers(reader, target) == []
    reader.rows(f"INSERT INTO {target} VALUES ('z', 2)")
    assert reader.value(f"SELECT count(*) FROM {target}") == 9, "a plain writer writes the new shape"


@pytest.mark.parametrize("reshape", [False, True], ids=["same_shape", "new_shape"])
def test_a_zombie_try_is_fenced_by_the_rest_commit(stack, reader, on_rest, tmp_path, reshape):
    """Only the commit's requirement on try 1's branch can refuse it: properties are not compared by
    a REST commit, and ``main`` is unchanged (``zombie_in_publish_window``). A replace that changes
    the table's shape carries the same requirement in the commit that changes its schema."""
    target = f"{CATALOG}.{NAMESPACE}.fenced_{'reshape' if reshape else 'same'}"
    dag_id = f"rest_zombie{'_reshape' if reshape else ''}"
    result = zombie_in_publish_window(_probe(reader, target), target, on_rest, tmp_path, dag_id, reshape)
    assert_zombie_fenced(reader, target, result)
    if reshape:
        assert reader.rows(f"SELECT DISTINCT typeof(id) FROM {target}") == [["string"]]


def _restart(rest: IcebergRestCatalog) -> None:
    IcebergRestCatalog(rest.root, rest.port).start()


def test_an_unreachable_catalog_is_refused_at_begin_and_fails_a_publish_that_a_retry_then_makes(
    stack, rest, reader, on_rest, tmp_path
):
    target = f"{CATALOG}.{NAMESPACE}.outage"
    reader.rows(f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(5)")

    rest.stop(STOP_GRACE)
    try:
        state, txn = iceberg_ctas("rest_down", on_rest, target_table=target, mode="replace", sql="SELECT 1 AS id")
    finally:
        _restart(rest)
    assert state == "failed" and txn["details"]["error"]["code"] == "CATALOG_UNAVAILABLE", txn
    assert f"spark.sql.catalog.{CATALOG}.uri" in txn["details"]["error"]["message"], "says what to fix"
    assert "prepare" not in [p["phase"] for p in txn["details"].get("phases", [])], "nothing was written"

    dag_id = "rest_outage"
    make_dag(dag_id, retries=1, target_table=target, mode="replace", sql=TRY_SQL, table_format="iceberg",
             conf=on_rest)  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(release), "only_try": 1}}
    started = time.monotonic()
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "outage", tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "before_publish try=1", timeout=240)
    rest.stop(STOP_GRACE)
    try:
        release.touch()
        first_state = first.wait()
    finally:
        _restart(rest)
    rows_after_try1 = reader.value(f"SELECT count(*) FROM {target}")
    with TablePoller(reader, target) as poller:
        second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "outage", tmp_path / "try2.log").start().wait()
    left = _leftovers(reader, target)
    problem = check_observations(poller.seen, {"5:0", "100:2"}, "100:2")
    record_format_cell(
        _probe(reader, target), "outage",
        "the catalog server stopped while try 1 waits at its publish (restarted after try 1 ends); try 2 "
        "runs without a fault", "replace", f"try 1: {first_state}; try 2: {second}", left, poller.seen,
        problem, started,
    )  # fmt: skip
    assert first_state != "success"
    assert rows_after_try1 == 5, "nothing was published"
    assert second == "success", Path(tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert left == [], "try 2's begin removed what try 1's failed abort could not"
    assert problem is None, summarize(poller.seen)


@pytest.mark.parametrize("loss", LOSE_MODES)
def test_a_publish_the_catalog_applied_but_whose_answer_was_lost_is_decided_from_the_table(
    stack, rest, reader, on_rest, tmp_path, loss
):
    """The catalog applies try 1's publish commit, but its answer never reaches the driver: a proxy
    in front of the server closes the connection once the server has answered (``close``), or
    answers 503 in its place, as a gateway does (``503``). The driver must not fail a try whose
    version is published: it reads the table and decides."""
    name = f"lost_{loss}"
    target = f"{CATALOG}.{NAMESPACE}.{name}"
    reader.rows(f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(5)")
    proxy = FaultProxy(("127.0.0.1", rest.port)).start()
    dag_id = f"rest_lost_{loss}"
    make_dag(dag_id, retries=1, target_table=target, mode="replace", sql=TRY_SQL, table_format="iceberg",
             conf={**on_rest, f"spark.sql.catalog.{CATALOG}.uri": proxy.url})  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(release), "only_try": 1}}
    started = time.monotonic()
    try:
        first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "lost", tmp_path / "try1.log", faults).start()
        wait_for_line(progress, "before_publish try=1", timeout=240)
        proxy.lose_answer(rf"^POST \S*/namespaces/{NAMESPACE}/tables/{name} HTTP", loss)
        with TablePoller(reader, target) as poller:
            release.touch()
            state = first.wait()
    finally:
        proxy.stop()
    txn = xcom_value(dag_id, "lost", "ctas_transaction")
    left = _leftovers(reader, target)
    problem = check_observations(poller.seen, {"5:0", "100:1"}, "100:1")
    record_format_cell(
        _probe(reader, target), f"answer-lost-{loss}",
        "the catalog applies try 1's publish commit; a proxy then closes the connection before its answer"
        if loss == "close" else "the catalog applies try 1's publish commit; a proxy answers 503 in its place, as "
        "a gateway does", "replace", f"try 1: {state} ({txn.get('outcome')})", left,
        poller.seen, problem, started,
    )  # fmt: skip
    assert len(proxy.lost) == 1, proxy.lost
    log = (tmp_path / "try1.log").read_text(errors="replace")
    assert state == "success", log[-3000:]
    assert (txn["try_number"], txn["outcome"]) == (1, "published"), txn
    assert reader.rows(f"SELECT count(*), max(written_by_try) FROM {target}") == [[100, 1]]
    assert reader.value(f"SELECT count(*) FROM {target}.snapshots") == 2, "no other snapshot was made"
    commit = next(p for p in txn["details"]["phases"] if p["phase"] == "commit")
    assert "the catalog did not confirm the publish; the table shows it" in commit["note"], commit
    assert left == [] and problem is None, problem


def test_partition_transforms_create_and_overwrite_only_their_partitions(stack, reader, on_rest):
    """``days(ts)``: the table is created with the transform, ``overwrite_partitions`` replaces only
    the day it writes (its per-partition check compares through the catalog's ``system.days``), and a
    partitioning other than the table's is refused before any data is written."""
    target = f"{CATALOG}.{NAMESPACE}.by_day"
    hours = "SELECT id, TIMESTAMP_NTZ '2026-11-01 00:00:00' + make_dt_interval(0, CAST(id AS INT), 0, 0) AS ts"
    state, txn = iceberg_ctas("rest_days_create", on_rest, target_table=target, mode="overwrite_partitions",
                       partition_by=["DAYS(ts)"], sql=f"{hours} FROM range(48)")  # fmt: skip
    assert state == "success", txn
    assert reader.rows(f"SELECT partition.ts_day, record_count FROM {target}.partitions ORDER BY 1") == [
        ["2026-11-01", 24], ["2026-11-02", 24]
    ]  # fmt: skip

    checks = [
        {"type": "row_count_change", "min_ratio": 0.4, "name": "per partition"},
        {"type": "row_count", "min": 34, "max": 34, "scope": "result", "name": "table rows"},
    ]
    state, txn = iceberg_ctas("rest_days_overwrite", on_rest, target_table=target, mode="overwrite_partitions",
                       partition_by=["days(ts)"], sql=f"{hours} FROM range(24, 34)", checks=checks)  # fmt: skip
    assert state == "success", txn
    assert [(c["name"], c["value"]) for c in txn["details"]["checks"]] == [("per partition", round(10 / 24, 4)),
                                                                           ("table rows", 34)]  # fmt: skip
    assert txn["details"]["publish"]["partitions"] == ["ts_day=2026-11-02"]
    assert reader.rows(f"SELECT partition.ts_day, record_count FROM {target}.partitions ORDER BY 1") == [
        ["2026-11-01", 24], ["2026-11-02", 10]
    ]  # fmt: skip

    state, txn = iceberg_ctas("rest_months", on_rest, target_table=target, mode="overwrite_partitions",
                       partition_by=["months(ts)"], sql=f"{hours} FROM range(3)")  # fmt: skip
    assert state == "failed" and txn["details"]["error"]["code"] == "UNSUPPORTED_TARGET", txn
    assert "partition_by ['months(ts)'] differs from" in txn["details"]["error"]["message"]
    assert "partitioning ['days(ts)']" in txn["details"]["error"]["message"]
    assert "prepare" not in [p["phase"] for p in txn["details"]["phases"]]
    assert _leftovers(reader, target) == []


def test_a_driver_killed_mid_write_publishes_nothing_and_a_retry_after_a_landed_publish_writes_nothing(
    stack, reader, on_rest, tmp_path
):
    """Try 1's driver is SIGKILLed mid-write: nothing published, its branch and fence go with try
    2's begin. Try 2's task process is SIGKILLed right after its publish: try 3 reports
    already_published and commits no new snapshot."""
    target = f"{CATALOG}.{NAMESPACE}.killed"
    reader.rows(
        f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try, "
        "CAST(NULL AS STRING) AS pause FROM range(5)"
    )
    result = kill_mid_write_then_after_publish(_probe(reader, target), target, "replace", on_rest, tmp_path)
    assert result["try1"] != "success"
    assert "already published by try 2" in (tmp_path / "try3.log").read_text(errors="replace")
    assert result["try3"] == "success" and result["new_versions"] == 0, "the retry wrote nothing"
    assert reader.rows(f"SELECT count(*), max(written_by_try) FROM {target}") == [[200, 2]]
    assert result["left"] == []
    assert result["problem"] is None, summarize(result["seen"])


def test_a_durable_replace_whose_task_died_at_the_decision_is_published_by_the_next_try_without_the_query(
    stack, reader, on_rest, tmp_path
):
    """Try 1 writes and audits on its branch, records it and asks for the decision; its task's
    process group (the task and its spark-submit) is SIGKILLed there. Try 2 adopts the branch in
    one metadata swap and publishes the snapshot try 1 wrote; its query never runs."""
    target = f"{CATALOG}.{NAMESPACE}.durable"
    reader.rows(f"DROP TABLE IF EXISTS {target} PURGE")
    reader.rows(f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(5)")
    dag_id = "rest_durable"
    make_dag(dag_id, retries=1, target_table=target, mode="replace", table_format="iceberg", conf=on_rest,
             durable=True, sql="SELECT id, CAST(1 AS BIGINT) AS written_by_try FROM range(100)",
             checks=[{"type": "unique", "columns": ["id"]}])  # fmt: skip
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "before_decision": {"sleep": 600, "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "durable", tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "before_decision try=1", timeout=240)
    kept = [k for k in reader.properties(target) if k.startswith("airflow_ctas.prepared.")]
    first.signal_group(signal.SIGKILL)
    first.wait()
    assert len(kept) == 1, "try 1 recorded its branch before it asked for the decision"
    staged = reader.value(f"SELECT snapshot_id FROM {target}.refs WHERE name != 'main'")
    assert reader.value(f"SELECT count(*) FROM {target}") == 5, "nothing was published"

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "durable", tmp_path / "try2.log").start().wait()
    assert second == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    txn = xcom_value(dag_id, "durable", "ctas_transaction")
    assert txn["details"]["adopted_from_try"] == 1, txn["details"]
    prepare = next(p for p in txn["details"]["phases"] if p["phase"] == "prepare")
    assert "the query did not run" in prepare["note"], prepare
    assert reader.value(f"SELECT snapshot_id FROM {target}.refs WHERE name = 'main'") == staged, "try 1's snapshot"
    assert reader.value(f"SELECT count(*) FROM {target}") == 100
    props = reader.properties(target)
    assert props[markers.TRY_NUMBER] == "2" and props[markers.CHECKS].startswith("1/1"), props
    assert _leftovers(reader, target) == []
