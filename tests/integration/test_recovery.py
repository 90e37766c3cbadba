"""Crash safety beyond single faults: zombie tries, concurrent writers, garbage collection, bad state."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseRequest
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.runners.coordinator import CommitCoordinator
from airflow_provider_ctas.runners.spark_connect import SparkConnectRunner
from airflow_provider_ctas.runners.spark_submit import SparkSubmitRunner
from airflow_provider_ctas.spark.engine import ClassicEngine
from tests.support.catalog import (
    count,
    database_dir,
    fresh,
    leftovers,
    location,
    partition_locations,
    properties,
    reserved_tables,
    retained_until,
)
from tests.support.dags import DAGS_FOLDER, make_dag, run_dag, state_store_value, xcom_value
from tests.support.faults import Reader, Trial, check_observations, wait_for_drivers_to_exit
from tests.support.fixtures import CONNECT_CONN_ID
from tests.support.gc import entries, gc_cli
from tests.support.processes import wait_for_line

pytestmark = [pytest.mark.integration, pytest.mark.faults]

TRY_SQL = "SELECT id, {{ ti.try_number }} AS written_by_try FROM range(100)"


@pytest.mark.parametrize("mode", ["create", "replace", "overwrite_partitions"])
def test_a_zombie_try_can_never_publish(stack, spark, database, tmp_path, mode):
    """A zombie try: Airflow has started try 2 while try 1's task process still lives (it lost track
    of it), so try 1's task still answers its driver's commit question. Try 2 publishes; try 1's
    driver then reaches its publish, is told commit by its own live task, and the catalog fence must
    stop it. (A try whose task process died never gets that far: test_orphans.py.) A replace's flip
    and a partition switch stage in a marked directory only, which the fence covers too."""
    target = f"{database}.fenced_{mode}"
    sql = TRY_SQL
    options: dict[str, Any] = {}
    if mode == "replace":
        spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 0 AS written_by_try FROM range(5)")
    if mode == "overwrite_partitions":
        sql, options = TRY_SQL.replace(" FROM", ", 'd' AS ds FROM"), {"partition_by": ["ds"]}
        seed = sql.replace("{{ ti.try_number }}", "0")
        spark.sql(f"CREATE TABLE {target} USING parquet PARTITIONED BY (ds) AS {seed}")
    dag_id = f"zombie_{mode}"
    make_dag(dag_id, retries=3, target_table=target, mode=mode, sql=sql, **options)
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "after_prepare": {"wait_for": str(release), "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "after_prepare try=1", timeout=240)

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / "try2.log").start().wait()
    assert second == "success"
    release.touch()
    wait_for_line(progress, "result phases=begin,prepare,commit ok=False FENCED", timeout=120)
    first.wait()
    wait_for_drivers_to_exit(target)
    assert "commit: the task decided commit for try 1" in (tmp_path / "try1.log").read_text(errors="replace")

    published = fresh(spark).table(target)
    assert published.count() == 100
    assert {row["written_by_try"] for row in published.collect()} == {2}
    if mode == "overwrite_partitions":
        [(_, where)] = partition_locations(spark, target).items()
        assert markers.parse_reserved_name(where.rstrip("/").split("/")[-2]).try_number == 2  # type: ignore[union-attr]
    else:
        assert properties(spark, target)[markers.TRY_NUMBER] == "2"
    assert leftovers(spark, database) == []


def test_a_paused_connect_try_can_never_publish(stack, connect_server, spark, database, tmp_path):
    """Over Spark Connect the phases run in the task process: try 1's process is frozen (SIGSTOP) after
    writing, try 2 runs and publishes, then try 1 resumes into its publish and must not publish."""
    target = f"{database}.fenced_connect"
    dag_id = "zombie_connect"
    make_dag(dag_id, retries=3, target_table=target, sql=TRY_SQL, conn_id=CONNECT_CONN_ID)
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "after_prepare": {"wait_for": str(release), "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "after_prepare try=1", timeout=240)
    first.signal_group(signal.SIGSTOP)
    try:
        second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / "try2.log").start().wait()
    finally:
        first.signal_group(signal.SIGCONT)
    assert second == "success"
    release.touch()
    wait_for_line(progress, "result phases=begin,prepare,commit ok=False SPARK_ERROR", timeout=120)
    first.wait(timeout=120)

    assert "INVALID_HANDLE.SESSION_CLOSED" in (tmp_path / "try1.log").read_text(errors="replace")
    # The superseded try wrote nothing a reader of the task instance trusts (issue 44): XCom and the
    # state store still describe try 2's publish.
    for stored in (
        xcom_value(dag_id, "zombie_run", "ctas_transaction"),
        state_store_value(dag_id, "zombie_run", "ctas_transaction"),
    ):
        assert stored is not None and stored["try_number"] == 2 and stored["state"] == "committed", stored
    published = fresh(spark).table(target)
    assert {row["written_by_try"] for row in published.collect()} == {2} and published.count() == 100
    assert properties(spark, target)[markers.TRY_NUMBER] == "2"
    assert leftovers(spark, database) == []


WRITERS = (1, 2, 3)


def _writer_table(database: str, target: str, writer: int, mode: str):
    key = TransactionKey(f"writer_{writer}", "ctas", f"run_{writer}")
    table = create_two_phase_table(key=key, conn_id="spark_default", target=target, mode=mode, table_format="parquet")
    table.begin(1, "2024-01-01T00:00:00+00:00")
    return table


# The create race is decided by the metastore's rename, the same code over either runner: Connect
# proves it (4 sessions, one server JVM); spark-submit proves the replace (flips racing).
@pytest.mark.parametrize(("mode", "runner"), [("replace", "spark_submit"), ("create", "connect")])
def test_concurrent_writers_publish_exactly_one_whole_version(stack, spark, database, tmp_path, mode, runner, request):
    """Three transactions (separate Spark drivers or Connect sessions, one metastore) publish one target at once."""
    if runner == "connect":
        request.getfixturevalue("connect_server")
    target = f"{database}.contended_{mode}_{runner}"
    if mode == "replace":
        spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 0 AS writer FROM range(50)")
    barrier, progress = tmp_path / "go", tmp_path / "progress"
    results: dict[int, object] = {}

    def write(writer: int) -> None:
        table = _writer_table(database, target, writer, mode)
        phases = PhaseRequest(
            phases=RUN_PHASES,
            table=table.to_dict(),
            sql=f"SELECT id, {writer} AS writer FROM range({100 * writer})",
            faults={"progress_file": str(progress), "after_prepare": {"wait_for": str(barrier)}},
        )
        name = f"airflow-ctas concurrent {target} writer {writer}"
        if runner == "connect":
            log = logging.getLogger(f"writer-{writer}")
            results[writer] = SparkConnectRunner(conn_id=CONNECT_CONN_ID, conf=None, log=log).run(phases, name=name)
        else:
            submit = SparkSubmitRunner(conn_id="spark_default", conf=None, submit_options=None)
            coordinator = CommitCoordinator(table.txn_id, table.try_number, logging.getLogger(f"writer-{writer}"))
            results[writer] = submit.run(phases, name=name, coordinator=coordinator)

    reader = Reader(spark, target).start()
    threads = [threading.Thread(target=write, args=(w,)) for w in WRITERS]
    for thread in threads:
        thread.start()
    staged = 0
    deadline = time.monotonic() + 300
    # All staged, then release them together (a flip's staging is no table: count the writers).
    while staged < len(WRITERS) and time.monotonic() < deadline:
        staged = progress.read_text().count("after_prepare") if progress.exists() else 0
        time.sleep(0.5)
    assert staged == len(WRITERS), f"only {staged} of {len(WRITERS)} writers staged"
    time.sleep(3)
    barrier.touch()
    for thread in threads:
        thread.join(timeout=300)
    values = reader.stop()

    winners = [w for w, r in results.items() if r.ok and r.outcome == "published"]  # type: ignore[attr-defined]
    final = fresh(spark).table(target)
    writers = {row["writer"] for row in final.select("writer").distinct().collect()}
    assert len(writers) == 1, f"the table mixes versions: {writers}"
    (writer,) = writers
    assert final.count() == 100 * writer, "the surviving version is whole"
    if mode == "create":
        assert winners == [writer], f"exactly one creator publishes: {winners}"
        for loser in set(results) - {writer}:
            error = results[loser].error  # type: ignore[attr-defined]
            assert error["code"] == "TARGET_EXISTS"
            assert f"dag 'writer_{writer}'" in error["message"] and f"run 'run_{writer}'" in error["message"]
        assert check_observations(values, {"missing", 100 * writer}, 100 * writer) is None
    else:
        # Last writer wins; every version a reader saw was whole (a flip per writer, no mix).
        assert writer in winners and all(r.ok for r in results.values())  # type: ignore[attr-defined]
        allowed = {50} | {100 * w for w in results}
        assert set(values) <= allowed, f"a reader saw a partial version: {set(values) - allowed}"
        # A flip that raced another may leave the version it replaced to garbage collection.
        gc_cli("--database", database, "--min-age", "0s")
    assert leftovers(spark, database) == []


def _crash_leaving_staging(dag_id: str, target: str, tmp_path: Path) -> None:
    """Try 1 dies with its driver after writing staging: no callback, no abort, nothing cleaned."""
    make_dag(dag_id, retries=3, target_table=target, sql="SELECT id FROM range(10)")
    progress = tmp_path / f"{dag_id}.progress"
    faults = {"progress_file": str(progress), "after_prepare": {"sleep": 120, "only_try": 1}}
    trial = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, f"{dag_id}_run", tmp_path / f"{dag_id}.log", faults).start()
    wait_for_line(progress, "after_prepare try=1", timeout=240)
    trial.signal_group(signal.SIGKILL)
    trial.wait()


def test_gc_removes_only_marked_old_orphans(stack, spark, database, tmp_path):
    target = f"{database}.orphaned"
    _crash_leaving_staging("gc_orphan", target, tmp_path)
    published = f"{database}.published"
    assert run_dag(make_dag("gc_live", target_table=published, sql="SELECT 1 AS x")).task_state == "success"
    root = database_dir(spark, database)
    # Look-alikes this provider did not create: a table with a reserved name and no markers, a
    # reserved-name directory with data but no marker file. And an empty reserved directory.
    spark.sql(f"CREATE TABLE {database}.__ctas_0123456789abcdef_s1 USING parquet AS SELECT 1 AS x")
    foreign_dir = root / "__ctas_fedcba9876543210_s2"
    foreign_dir.mkdir()
    (foreign_dir / "part-0.parquet").write_text("not ours")
    empty_dir = root / "__ctas_aaaaaaaaaaaaaaaa_s3"
    empty_dir.mkdir()
    ours = [name for name in reserved_tables(spark, database) if not name.startswith("__ctas_0123")]
    assert len(ours) == 1, "the crash left its staging table"
    staging_dir = root / ours[0]
    assert staging_dir.exists()

    young = gc_cli("--database", database, "--min-age", "1h")
    assert not entries(young, "removed") and not entries(young, "would be removed")
    assert any("younger than min_age" in why for why in entries(young, "kept").values())
    assert staging_dir.exists() and empty_dir.exists()

    listing = gc_cli("--database", database, "--min-age", "0s", "--dry-run")
    assert f"spark_catalog.{database}.{ours[0]}" in entries(listing, "would be removed")
    assert staging_dir.exists(), "a dry run changes nothing"

    report = gc_cli("--database", database, "--min-age", "0s")
    removed, kept = entries(report, "removed"), entries(report, "kept")
    assert f"spark_catalog.{database}.{ours[0]}" in removed
    assert (
        kept[f"spark_catalog.{database}.__ctas_0123456789abcdef_s1"] == "reserved name without this provider's markers"
    )
    assert kept[next(k for k in kept if k.endswith("__ctas_fedcba9876543210_s2"))].startswith(
        "reserved name but no marker"
    )
    assert not staging_dir.exists() and not empty_dir.exists()
    assert (foreign_dir / "part-0.parquet").read_text() == "not ours"
    assert fresh(spark).table(f"{database}.__ctas_0123456789abcdef_s1").count() == 1
    assert count(spark, published) == 1, "a published table is never touched"
    assert location(spark, published).exists()


def test_gc_operator_spares_transactions_airflow_says_are_active(stack, spark, database, tmp_path):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    target = f"{database}.still_running"
    _crash_leaving_staging("gc_active", target, tmp_path)
    assert len(reserved_tables(spark, database)) == 1

    def set_state(state: str) -> None:
        with create_session() as session:
            ti = session.query(TaskInstance).filter_by(dag_id="gc_active", run_id="gc_active_run").one()
            ti.state = state

    extra = "from airflow_provider_ctas.operators import AtomicCtasGcOperator\n"
    set_state("running")
    gc_dag = make_gc_dag("maintenance_gc", database, extra)
    first = run_dag(gc_dag, task_id="gc")
    assert first.task_state == "success"
    assert len(reserved_tables(spark, database)) == 1, "an active task instance's staging stays"
    report = xcom_value("maintenance_gc", first.run_id, "return_value")
    assert any(e["why"] == "its task instance is still active in Airflow" for e in report["entries"])

    set_state("failed")
    second = run_dag(gc_dag, task_id="gc")
    assert second.task_state == "success"
    assert reserved_tables(spark, database) == []
    assert leftovers(spark, database) == []


def make_gc_dag(dag_id: str, database: str, extra: str):
    source = f"""\
import datetime
import pendulum
from airflow.sdk import DAG
{extra}
with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False) as dag:
    AtomicCtasGcOperator(task_id="gc", databases=[{database!r}], min_age=datetime.timedelta(0))
"""
    path = DAGS_FOLDER / f"{dag_id}.py"
    path.write_text(source)
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"gc_{dag_id}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def test_corrupt_state_fails_closed_and_deletes_nothing(stack, spark, database, tmp_path):
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session

    target = f"{database}.tampered"
    _crash_leaving_staging("tampered", target, tmp_path)
    staging = reserved_tables(spark, database)
    assert len(staging) == 1
    with create_session() as session:
        row = session.query(TaskStateStoreModel).filter_by(dag_id="tampered", key="ctas_transaction").one()
        value = json.loads(row.value)
        value["kind"] = "os.system"
        row.value = json.dumps(value)

    state = Trial(DAGS_FOLDER / "tampered.py", "tampered", "tampered_run", tmp_path / "try2.log").start().wait()
    log = (tmp_path / "try2.log").read_text()
    assert state == "failed", "corrupt durable state is not retried"
    assert "unknown kind 'os.system'" in log
    assert "refusing to start any Spark work" in log or "CORRUPT_STATE" in log
    assert "Spark-Submit cmd" not in log, "no Spark work for a transaction whose state cannot be trusted"
    assert reserved_tables(spark, database) == staging, "nothing was deleted"
    assert not fresh(spark).catalog.tableExists(target)


def test_a_replaced_version_stays_readable_for_sessions_that_cached_it(stack, spark, database):
    """A session that never refreshes (a Thrift server, a BI tool) keeps reading the version it listed
    until the retention ends; then the next publish over the data, or GC, deletes it."""
    target = f"{database}.cached_dim"

    def replace(dag_id: str, rows: int, retention: int = 3) -> str:
        dag = make_dag(dag_id, target_table=target, mode="replace", sql=f"SELECT id FROM range({rows})",
                       superseded_retention=retention)  # fmt: skip
        return run_dag(dag).task_state

    def wait_out(path: Path) -> None:
        due = retained_until(path)
        assert due is not None, f"{path} carries no superseded record"
        time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()) + 0.5)

    assert replace("cached_1", 10) == "success"  # created by a rename
    first_dir = location(spark, target)
    cached = spark.newSession()  # lists the files once, never refreshes
    read = f"SELECT count(*) AS n FROM {target}"
    assert cached.sql(read).collect()[0]["n"] == 10

    assert replace("cached_2", 20) == "success"  # a flip: first_dir is superseded, kept for 3 s
    assert cached.sql(read).collect()[0]["n"] == 10, "a stale session reads the version it listed"
    assert count(spark, target) == 20
    assert first_dir.exists() and retained_until(first_dir) is not None
    assert leftovers(spark, database) == []
    second_dir = location(spark, target)

    wait_out(first_dir)
    assert replace("cached_3", 30, retention=600) == "success"  # sweeps what is past its retention
    assert not first_dir.exists(), "the next publish deletes a superseded version once its retention ended"
    with pytest.raises(Exception, match=r"FILE_NOT_EXIST|FileNotFound"):
        cached.sql(read).collect()  # past the retention a session that never refreshed fails
    assert second_dir.exists() and retained_until(second_dir) is not None

    kept = entries(gc_cli("--database", database, "--min-age", "0s"), "kept")
    assert any(what.endswith(second_dir.name) and "kept for readers until" in why for what, why in kept.items())
    # Ten minutes pass: the record's time is moved back rather than waited out.
    record_file = second_dir / markers.SUPERSEDED_FILE
    record = markers.SupersededRecord.parse(record_file.read_text())
    assert record is not None
    record_file.write_text(dataclasses.replace(record, delete_after="2000-01-01T00:00:00+00:00").to_json())
    assert not (second_dir / f".{markers.SUPERSEDED_FILE}.crc").exists(), "no checksum to go stale on an edit"
    removed = entries(gc_cli("--database", database, "--min-age", "0s"), "removed")
    assert any(what.endswith(second_dir.name) for what in removed), removed
    assert not second_dir.exists()
    assert count(spark, target) == 30
    assert leftovers(spark, database) == []


def test_a_clean_up_after_a_failure_first_waits_for_the_failed_job_s_tasks(spark):
    """A write's error reaches the driver while the failed job's other tasks may still run and
    write: the chaos soak (seed 2075394856) found a Delta try whose failed query's tasks made its
    staging directory again after its abort had dropped the staging table, left without a log for
    every later try and GC. The driver's clean-up after a failure now cancels the session's jobs
    and waits until none of their tasks runs."""
    context = spark.sparkContext
    tracker = context._jsc.sc().statusTracker()

    def running() -> int:
        return int(sum(info.numRunningTasks() for info in tracker.getExecutorInfos()))

    failed: list[BaseException] = []

    def slow_job() -> None:
        try:
            # A millisecond a row: a task stops at its next check for a kill, as a write's task does.
            sleep = "reflect('java.lang.Thread', 'sleep', CAST(1 AS BIGINT))"
            spark.range(0, 1_000_000, 1, 4).selectExpr(sleep).collect()
        except BaseException as exc:
            failed.append(exc)

    job = threading.Thread(target=slow_job)
    job.start()
    deadline = time.monotonic() + 120
    while running() == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running() > 0, "the job's tasks run"
    started = time.monotonic()
    assert ClassicEngine(spark).settle(timeout=60) == 0
    assert running() == 0 and time.monotonic() - started < 60, "cancelled, not waited out"
    job.join(timeout=60)
    assert failed and "cancel" in str(failed[0]).lower(), failed
