"""The Delta strategy on real Delta (the 4.4 runtime from Maven Central) with Delta's catalog as
Spark's session catalog on this session's metastore service, through the real operator, its driver
on Spark 4.1 (a Spark both Delta 4.4 and Iceberg 1.11 support). An independent reader (its own
Spark 4.1 JVM with the runtime, ``tests/support/delta.py``) checks the tables.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.delta.session import check_delta_catalog
from airflow_provider_ctas.catalogs.delta.strategy import DELTA_CATALOG_CLASS
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.transaction import TransactionKey
from ctas_devstack.connect_server import ConnectServer
from tests.support.catalog import database_dir
from tests.support.dags import DAGS_FOLDER, make_dag, run_dag, xcom_value
from tests.support.delta import DeltaReader, delta_conf
from tests.support.faults import (
    Trial,
    check_observations,
    older_try_resumed_beside_newer,
    summarize,
    wait_for_drivers_to_exit,
)
from tests.support.fixtures import STOP_GRACE
from tests.support.format_scenarios import (
    FormatProbe,
    kill_mid_write_then_after_publish,
    kill_task_at,
    one_winner,
    race_two_creators,
    record_format_cell,
)
from tests.support.gc import entries, gc_cli
from tests.support.processes import wait_for_line
from tests.support.spark_versions import SPARK_FOR_FORMATS, on_release, pyspark_venv
from tests.support.table_reader import TablePoller

# One test worker runs the whole module: its module-scoped services start once, not on every worker.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.formats, pytest.mark.xdist_group("delta")]


@pytest.fixture(scope="module")
def reader(metastore, tmp_path_factory) -> Iterator[DeltaReader]:
    session = DeltaReader(tmp_path_factory.mktemp("delta") / "reader.log")
    yield session
    session.close()


@pytest.fixture
def on_spark41(monkeypatch) -> dict[str, str]:
    """A task's conf for Delta; its spark-submit and driver are Spark 4.1's."""
    env, conf = on_release(SPARK_FOR_FORMATS, archive=True)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {**conf, **delta_conf()}


def _ctas(dag_id: str, conf: dict[str, str], **kwargs: Any) -> tuple[str, dict[str, Any]]:
    run = run_dag(make_dag(dag_id, conf=conf, table_format="delta", **kwargs))
    return run.task_state, xcom_value(dag_id, run.run_id, "ctas_transaction") or {}


def _leftovers(spark: Any, reader: DeltaReader, database: str) -> list[str]:
    """Staging tables, and directories under reserved names in the database's location (a Delta
    table's files and log are written before its catalog entry exists)."""
    location = database_dir(spark, database)
    directories = sorted(f"{p.name}/" for p in location.glob("__ctas_*"))
    return reader.staging_tables(database) + directories


def _error(txn: dict[str, Any]) -> tuple[str, str]:
    error = txn["details"]["error"]
    return error["code"], error["message"]


def test_delta_lifecycle(stack, spark, reader, on_spark41, database):
    target = f"{database}.events"

    state, txn = _ctas("delta_create", on_spark41, target_table=target, sql="SELECT id, id % 7 AS k FROM range(700)",
                       comment="events", column_comments={"id": "event id", "k": "bucket"})  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert (txn["details"]["row_count"], txn["details"]["delta_version"]) == (700, 1), "the staging write, read"
    assert txn["details"]["spark_application"]["version"] == SPARK_FOR_FORMATS
    assert txn["details"]["metastore_uris"] == stack.uri
    assert reader.value(f"SELECT count(*) FROM {target}") == 700
    created = reader.properties(target)
    assert created[markers.TXN_ID] == TransactionKey("delta_create", "ctas", txn["key"]["run_id"]).txn_id
    history = reader.history(target)
    assert [h["operation"] for h in history] == ["WRITE", "CREATE TABLE"], "created empty, then written"
    for commit in history:
        assert json.loads(commit["userMetadata"])[markers.DAG_ID] == "delta_create", "provenance on the commits"
    created_version = history[0]["version"]
    assert reader.comments(target) == ("events", {"id": "event id", "k": "bucket"})

    # A replace that changes the schema, checked first: the checks read the staging table it wrote,
    # then one Delta commit of that table's rows, the schema and the properties.
    checks = [{"type": "unique", "columns": ["id"]}, {"type": "not_null", "columns": ["k"]}]
    state, txn = _ctas("delta_replace", on_spark41, target_table=target, mode="replace", partition_by=["k"],
                       sql="SELECT id, CAST(id % 2 AS STRING) AS k, id * 2 AS extra FROM range(50)",
                       checks=checks, column_comments={"extra": "twice the id"})  # fmt: skip
    assert state == "success", txn
    assert [(c["passed"], c["note"]) for c in txn["details"]["checks"]] == [
        (True, ""),  # a distinct count: a query after the write
        (True, "measured by the write"),
    ]
    assert reader.properties(target)[markers.CHECKS].startswith("2/2 passed"), "the checks' summary, published"
    assert _leftovers(spark, reader, database) == [], "the checked staging table went with the publish"
    assert txn["details"]["publish"]["mechanism"] == "delta_commit"
    assert reader.rows(f"SELECT count(*), max(extra) FROM {target}") == [[50, 98]]
    assert reader.records(f"DESCRIBE DETAIL {target}")[0]["partitionColumns"] == ["k"]
    assert reader.comments(target) == ("events", {"id": "event id", "k": "bucket", "extra": "twice the id"}), (
        "Delta's replace takes the comments the provider gives it: the table's own for the columns it keeps, "
        "and the one the operator named"
    )
    history = reader.history(target)
    operations = [h["operation"] for h in history]
    assert operations == ["CREATE OR REPLACE TABLE AS SELECT", "WRITE", "CREATE TABLE"], (
        "one commit; a first try has no earlier try to fence"
    )
    assert json.loads(history[0]["userMetadata"])[markers.TRY_NUMBER] == "1"
    assert reader.properties(target)[markers.DAG_ID] == "delta_replace"
    assert reader.value(f"SELECT count(*) FROM {target} VERSION AS OF {created_version}") == 700, (
        "the replaced version stays readable by time travel"
    )

    # A failed check: the staged rows are never published, the table and its history stay as they were.
    # The NULL stops the staging's write (a guard); the write again counts what fails.
    versions = len(reader.history(target))
    state, txn = _ctas("delta_audit_fails", on_spark41, target_table=target, mode="replace",
                       sql="SELECT 1 AS id, IF(id = 1, NULL, 'x') AS k, 0 AS extra FROM range(3)",
                       checks=checks)  # fmt: skip
    assert state == "failed" and _error(txn)[0] == "AUDIT_FAILED", txn
    assert [(c["passed"], c["value"], c["note"]) for c in txn["details"]["checks"]] == [
        (False, 2, ""),
        (False, 1, "measured by the write"),
    ]
    assert reader.rows(f"SELECT count(*), max(extra) FROM {target}") == [[50, 98]]
    assert len(reader.history(target)) == versions, "no commit"
    assert _leftovers(spark, reader, database) == []

    # A query that fails mid-write: the data and schema stay, nothing is left.
    failing = "SELECT id, CAST(IF(id = 7, raise_error('boom'), 'y') AS STRING) AS k FROM range(40)"
    versions = len(reader.history(target))
    state, txn = _ctas("delta_failed", on_spark41, target_table=target, mode="replace", sql=failing)
    assert state == "failed" and _error(txn)[0] == "QUERY_FAILED"
    assert reader.rows(f"SELECT count(*), max(extra) FROM {target}") == [[50, 98]]
    assert len(reader.history(target)) == versions, "no commit"
    assert _leftovers(spark, reader, database) == []

    # overwrite_partitions: one partition overwritten in one Delta commit, the others untouched.
    daily = f"{database}.daily"
    reader.rows(f"CREATE TABLE {daily} USING delta PARTITIONED BY (ds) AS "
                "SELECT id, IF(id < 30, 'a', 'b') AS ds FROM range(50)")  # fmt: skip
    state, txn = _ctas("delta_parts_2", on_spark41, target_table=daily, mode="overwrite_partitions",
                       partition_by=["ds"], sql="SELECT id, 'b' AS ds FROM range(5)", comment="daily",
                       column_comments={"ds": "the day"},
                       checks=[{"type": "row_count", "min": 35, "max": 35, "scope": "result"}])  # fmt: skip
    assert state == "success" and txn["details"]["publish"]["mechanism"] == "delta_commit", txn
    assert txn["details"]["checks"][0]["value"] == 35, "the result: partition a kept, b replaced"
    assert reader.rows(f"SELECT ds, count(*) FROM {daily} GROUP BY ds ORDER BY ds") == [["a", 30], ["b", 5]]
    assert reader.comments(daily) == ("daily", {"ds": "the day"}), "set on the table whose partitions it overwrote"
    assert _leftovers(spark, reader, database) == []
    operations = [h["operation"] for h in reader.history(daily)[:3]]
    assert operations == ["CHANGE COLUMN", "SET TBLPROPERTIES", "WRITE"], "the comments follow the one data commit"
    assert txn["details"]["row_count"] == 5

    # A table that is not a Delta table: a replace would be Delta's drop-then-create; refused, untouched.
    spark.sql(f"CREATE TABLE {database}.parquet_owned USING parquet AS SELECT 7 AS id")
    state, txn = _ctas("delta_taken", on_spark41, target_table=f"{database}.parquet_owned", mode="replace",
                       sql="SELECT 1 AS id")  # fmt: skip
    assert state == "failed" and _error(txn)[0] == "UNSUPPORTED_TARGET", txn
    assert "is a parquet table, not a Delta table" in _error(txn)[1]
    assert [r.id for r in spark.table(f"{database}.parquet_owned").collect()] == [7]


@pytest.mark.parametrize(
    ("catalog", "message"),
    [
        (None, "Spark's session catalog is the built-in one, not Delta's: set spark.sql.catalog.spark_catalog="),
        (DELTA_CATALOG_CLASS, "the Delta runtime is not on the driver's classpath"),
    ],
)
def test_catalog_problems_are_refused_with_the_fix_before_any_spark_work(spark, catalog, message):
    """In a real driver session: this test process's Spark 4.3, which has no Delta runtime."""
    key = "spark.sql.catalog.spark_catalog"
    try:
        if catalog:
            spark.conf.set(key, catalog)
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            check_delta_catalog(spark)
    finally:
        spark.conf.unset(key)


# Try 2's rows each open a FIFO, which blocks until the test opens its other end: try 2 stays
# mid-write until try 3 has published, however long that takes.
ZOMBIE_SQL = (
    "SELECT id, CAST({{ ti.try_number }} AS BIGINT) AS written_by_try, "
    "{% if ti.try_number == 2 %}CAST(reflect('scala.io.Source', 'fromFile', 'HOLD', 'UTF-8') IS NULL AS STRING)"
    "{% else %}CAST(NULL AS STRING){% endif %} AS pause "
    "FROM range(0, 100, 1, 2)"
)


def test_superseded_tries_never_commit(stack, spark, reader, on_spark41, database, tmp_path):
    """Try 1 is held after prepare with its task alive; try 2 is mid-write when try 3 begins; try 3
    publishes. Try 2's commit is refused by Delta's conflict check (try 3's fence landed during its
    write), then try 1 is told commit by its own task and Delta skips its write: both FENCED."""
    target = f"{database}.fenced"
    reader.rows(
        f"CREATE TABLE {target} USING delta COMMENT 'fenced' AS SELECT id, CAST(0 AS BIGINT) AS written_by_try, "
        "CAST(NULL AS STRING) AS pause FROM range(5)"
    )
    reader.rows(f"ALTER TABLE {target} ALTER COLUMN id COMMENT 'the id'")
    dag_id = "delta_zombie"
    hold = tmp_path / "hold"
    os.mkfifo(hold)
    make_dag(dag_id, retries=3, target_table=target, mode="replace", sql=ZOMBIE_SQL.replace("HOLD", str(hold)),
             table_format="delta", conf=on_spark41)  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    held: list[int] = []

    def trial(n: int, faults: dict[str, Any]) -> Trial:
        faults = {"progress_file": str(progress), **faults}
        return Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / f"try{n}.log", faults).start()

    started = time.monotonic()
    try:
        with TablePoller(reader, target) as poller:
            first = trial(1, {"after_prepare": {"wait_for": str(release), "only_try": 1}})
            wait_for_line(progress, "after_prepare try=1", timeout=240)
            second = trial(2, {"before_write": {"only_try": 2}})
            wait_for_line(progress, "before_write try=2", timeout=240)
            third = trial(3, {}).wait()
            held.append(os.open(hold, os.O_RDWR))  # never blocks; try 2's rows go on
            wait_for_line(progress, "result phases=begin,prepare,commit ok=False FENCED", timeout=240)
            try2 = second.wait()
            release.touch()
            wait_for_line(progress, "result phases=begin,prepare,commit ok=False FENCED", timeout=240, count=2)
            try1 = first.wait()
            wait_for_drivers_to_exit(target)
    finally:
        release.touch()
        for fd in held or [os.open(hold, os.O_RDWR)]:
            os.close(fd)
    log1, log2 = ((tmp_path / f"try{n}.log").read_text(errors="replace") for n in (1, 2))
    left = _leftovers(spark, reader, database)
    problem = check_observations(poller.seen, {"5:0", "100:3"}, "100:3")
    record_format_cell(
        _probe(spark, reader, database), "zombie", "try 1 held after prepare (its task alive); try 2 mid-write "
        "when try 3 begins; try 3 publishes; then try 1 is told commit", "replace",
        f"try 1: {try1} (FENCED, write skipped); try 2: {try2} (FENCED, commit refused); try 3: {third}",
        left, poller.seen, problem, started,
    )  # fmt: skip
    assert third == "success" and try1 != "success" and try2 != "success"
    assert "Delta refused its commit" in log2, "try 2: Delta's conflict check on the fence"
    assert "commit: the task decided commit for try 1" in log1 and "Delta skipped try 1's write" in log1
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[3]]
    assert reader.value(f"SELECT count(*) FROM {target}") == 100
    assert reader.comments(target) == ("fenced", {"id": "the id"}), "the replace kept the table's comments"
    stored = xcom_value(dag_id, "zombie_run", "ctas_transaction")
    assert (stored["try_number"], stored["state"]) == (3, "committed"), "the FENCED tries wrote no XCom over try 3's"
    assert left == []
    assert problem is None, summarize(poller.seen)


def _probe(spark: Any, reader: DeltaReader, database: str) -> FormatProbe:
    return FormatProbe(
        "delta",
        reader,
        leftovers=lambda: _leftovers(spark, reader, database),
        versions=lambda table: len(reader.history(table)),
    )


@pytest.mark.parametrize("held_at_point", ["after_begin", "before_staging"])
def test_a_create_try_held_in_or_after_its_begin_is_fenced_by_the_next_try(
    held_at_point, stack, spark, reader, on_spark41, database, tmp_path
):
    """The chaos soak's seed 864633392: try 1 of a create is held right after its begin while its task
    instance is cleared; try 2 begins beside it and is held before its publish; try 1, resumed, must
    publish nothing (it did, when a new table's staging was created in prepare: after try 2's begin,
    which had nothing of try 1's to drop). Then try 2 publishes. ``before_staging``: try 1 is held
    inside its begin, before it created its staging, so try 2's begin has nothing of it to drop
    either; try 1 finds try 2's staging right before its rename."""
    target, dag_id = f"{database}.held_create_{held_at_point}", f"delta_held_create_{held_at_point}"
    make_dag(dag_id, retries=2, target_table=target, mode="create", sql="SELECT id FROM range(30)",
             table_format="delta", conf=on_spark41)  # fmt: skip
    tries = older_try_resumed_beside_newer(dag_id, "held", held_at_point, tmp_path)
    wait_for_drivers_to_exit(target)
    assert "after_publish try=1" not in tries.progress, "try 1 published after try 2 began"
    assert tries.first != "success" and "[FENCED]" in tries.first_log, tries.first_log[-3000:]
    assert tries.second == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    assert reader.value(f"SELECT count(*) FROM {target}") == 30
    latest = reader.history(target)[0]
    assert latest["operation"] == "WRITE" and json.loads(latest["userMetadata"])[markers.TRY_NUMBER] == "2", latest
    assert _leftovers(spark, reader, database) == []


@pytest.fixture(scope="module")
def delta_connect(metastore, tmp_path_factory) -> Iterator[str]:
    """A Spark Connect server on Spark 4.1 with the Delta runtime and Delta's catalog, on this
    session's metastore; its ``spark_connect`` connection id (the token is its password)."""
    env, _ = on_release(SPARK_FOR_FORMATS, archive=True)
    (home,) = pyspark_venv(SPARK_FOR_FORMATS).glob("lib/python*/site-packages/pyspark")
    token, conn_id = secrets.token_urlsafe(24), "spark_connect_delta"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        server = ConnectServer(tmp_path_factory.mktemp("delta-connect"), token=token, home=home,
                               conf={**delta_conf(), "spark.driver.memory": "1g"}).start()  # fmt: skip
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    os.environ[variable] = json.dumps(
        {"conn_type": "spark_connect", "host": server.host, "port": server.port, "password": token}
    )
    yield conn_id
    os.environ.pop(variable, None)
    server.stop(STOP_GRACE)


def test_delta_over_spark_connect_creates_replaces_and_fences_an_earlier_try(
    stack, spark, reader, delta_connect, database, monkeypatch
):
    """The phases run in the task process against the server's Delta catalog: the same executor,
    the same fence (an earlier try's application version, recorded by an empty commit)."""
    target = f"{database}.over_connect"
    state, txn = _ctas("delta_connect_create", {}, conn_id=delta_connect, target_table=target,
                       sql="SELECT id, id % 7 AS k FROM range(70)", comment="over Connect",
                       checks=[{"type": "unique", "columns": ["id"]}])  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert txn["details"]["spark_application"]["version"] == SPARK_FOR_FORMATS, "the server's Spark"
    assert reader.value(f"SELECT count(*) FROM {target}") == 70
    assert reader.properties(target)[markers.CHECKS] == "1/1 passed: unique(id)=0"

    # Try 1 fails after it prepared; try 2 fences it, then replaces the table in one commit.
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"after_prepare": {"raise": "worker lost", "only_try": 1}}))
    state, txn = _ctas("delta_connect_replace", {}, conn_id=delta_connect, target_table=target, mode="replace",
                       sql="SELECT id, CAST(id AS STRING) AS k FROM range(30)", retries=1)  # fmt: skip
    assert state == "success" and txn["try_number"] == 2, txn
    begun = next(p for p in txn["details"]["phases"] if p["phase"] == "begin")
    assert any("tries up to 1 fenced" in t for t in begun["touched"]), begun
    assert reader.rows(f"SELECT count(*), max(k) FROM {target}") == [[30, "9"]]
    assert reader.history(target)[0]["operation"] == "CREATE OR REPLACE TABLE AS SELECT"
    assert reader.comments(target) == ("over Connect", {}), "the replace kept the table's comment"
    assert _leftovers(spark, reader, database) == []


@pytest.mark.parametrize("mode", ["create", "overwrite_partitions"])
def test_killed_tries_leave_nothing_and_a_retry_after_a_landed_commit_writes_nothing(
    stack, spark, reader, on_spark41, database, tmp_path, mode
):
    """Try 1's driver is SIGKILLed mid-write (a new table: once its rows' files are on disk in its
    staging table, created empty before them): nothing published, nothing left. Try 2's task
    process is SIGKILLed right after its publish: try 3 reports already_published and commits
    nothing. In place (a partition overwrite, whose commit leaves the table's markers as they
    were) try 3 learns it from Delta skipping its fence."""
    target = f"{database}.killed_{mode}"
    if mode == "overwrite_partitions":
        reader.rows(
            f"CREATE TABLE {target} USING delta PARTITIONED BY (part) AS SELECT id, CAST(0 AS BIGINT) AS "
            "written_by_try, CAST(NULL AS STRING) AS pause, 'p' AS part FROM range(5)"
        )
    location = database_dir(spark, database)
    written = (lambda: bool(list(location.glob("__ctas_*_s1/part-*")))) if mode == "create" else (lambda: True)
    result = kill_mid_write_then_after_publish(_probe(spark, reader, database), target, mode, on_spark41, tmp_path,
                                               files_written=written)  # fmt: skip
    assert result["try1"] != "success" and result["published_before"] is (mode == "overwrite_partitions")
    # A killed staging write leaves its marked staging table; try 1's abort run drops it.
    assert result["left1"] == []
    if mode == "create":
        assert "_s1 (dropped)" in (tmp_path / "try1.log").read_text(errors="replace")
    assert "already published by try 2" in (tmp_path / "try3.log").read_text(errors="replace")
    assert result["try3"] == "success" and result["new_versions"] == 0, "the retry wrote nothing"
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert reader.value(f"SELECT count(*) FROM {target}") == 200
    assert result["left"] == []
    assert result["problem"] is None, summarize(result["seen"])


def test_two_creators_race_and_exactly_one_publishes(stack, spark, reader, on_spark41, database, tmp_path):
    """Two task instances create the same Delta table; both reach their publish at once."""
    target = f"{database}.raced"
    probe = _probe(spark, reader, database)
    winner, error = one_winner(probe, race_two_creators(probe, target, on_spark41, tmp_path))
    assert reader.rows(f"SELECT DISTINCT writer FROM {target}") == [[winner]]
    assert reader.value(f"SELECT count(*) FROM {target}") == winner * 100
    assert error["code"] == "TARGET_EXISTS" and "created by another writer" in error["message"]
    assert _leftovers(spark, reader, database) == []


def test_a_backfill_s_first_dates_race_to_create_and_both_publish(stack, spark, reader, on_spark41, database, tmp_path):
    """overwrite_partitions of two task instances on a missing table, both at their publish at once:
    one creates the table, the other overwrites its partition in it instead of failing, with the rows
    its checks passed on (its staging table's, written into the table before the staging is dropped).
    Their renames into the name take turns: writer 1, held inside its claim on the name, has writer 2
    wait rather than rename beside it (two overlapping renames once left the created table without
    its directory: ``DELTA_PATH_DOES_NOT_EXIST``)."""
    target = f"{database}.first_use"

    def while_claimed() -> None:
        assert not reader.exists(target), "writer 2 renamed into the name writer 1 holds"

    states = race_two_creators(_probe(spark, reader, database), target, on_spark41, tmp_path, name="first_use",
                               while_claimed=while_claimed, mode="overwrite_partitions", partition_by=["writer"],
                               checks=[{"type": "not_null", "columns": ["id"]}])  # fmt: skip
    assert states == {1: "success", 2: "success"}
    assert reader.rows(f"SELECT writer, count(*) FROM {target} GROUP BY writer ORDER BY writer") == [[1, 100], [2, 200]]
    assert _leftovers(spark, reader, database) == []


def test_gc_removes_a_killed_try_s_staging_table_and_nothing_else(stack, spark, reader, on_spark41, database, tmp_path):
    """GC with Delta's catalog. A create try SIGKILLed with its task mid-write (no abort, no retry)
    leaves its staging table, created empty with its markers, and its rows' uncommitted files: kept
    while younger than min_age, then dropped with all its files. A staging table's log whose catalog
    entry was never made (its first commit's markers match its name) goes too. Kept: a reserved-name
    directory without this provider's marker file, a log whose markers name another try, the
    database's Delta tables."""
    target = f"{database}.gc_new"
    slow = "reflect('java.lang.Thread', 'sleep', CAST(200 AS BIGINT))"
    make_dag("delta_gc_killed", target_table=target, sql=f"SELECT id, {slow} AS pause FROM range(0, 200, 1, 2)",
             table_format="delta", conf=on_spark41)  # fmt: skip
    location = database_dir(spark, database)
    kill_task_at("delta_gc_killed", "gc_killed", "before_write", target, tmp_path,
                 until=lambda: bool(list(location.glob("__ctas_*_s1/part-*"))))  # fmt: skip
    [staging] = reader.staging_tables(database)
    assert list((location / staging).glob("part-*")), "the killed write's files"
    unmarked = location / markers.staging_name("f" * 32, 1)
    unmarked.mkdir()
    (unmarked / "part-00000-0.snappy.parquet").write_bytes(b"PAR1")
    logs = {}
    for txn_id, try_number in (("e" * 32, 1), ("d" * 32, 2)):
        logs[try_number] = location / markers.staging_name(txn_id, 1)
        props = {markers.TXN_ID: txn_id, markers.TRY_NUMBER: str(try_number), markers.CREATED_AT: now_iso()}
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        reader.rows(f"CREATE TABLE delta.`{logs[try_number]}` (id BIGINT) USING delta TBLPROPERTIES ({listed})")
    kept_table = f"{database}.kept_delta"
    reader.rows(f"CREATE TABLE {kept_table} USING delta AS SELECT 7 AS id")
    conf = [arg for key, value in on_spark41.items() for arg in ("--conf", f"{key}={value}")]

    young = gc_cli("--database", database, "--min-age", "1h", *conf)
    assert not entries(young, "removed"), young
    assert "younger than min_age" in entries(young, "kept")[f"spark_catalog.{database}.{staging}"]

    report = gc_cli("--database", database, "--min-age", "0s", *conf)
    removed, kept = entries(report, "removed"), entries(report, "kept")

    def entry(listed: dict[str, str], path: Path) -> str:
        return listed[next(k for k in listed if k.endswith(path.name))]

    assert removed[f"spark_catalog.{database}.{staging}"] == "orphan staging table (with its data)", report
    assert entry(removed, logs[1]) == "orphan Delta staging table without a catalog entry"
    assert entry(kept, logs[2]).startswith("reserved name but no marker")
    assert entry(kept, unmarked).startswith("reserved name but no marker")
    assert reader.staging_tables(database) == [] and not (location / staging).exists()
    assert not logs[1].exists() and (logs[2] / "_delta_log").is_dir()
    assert (unmarked / "part-00000-0.snappy.parquet").exists()
    assert reader.value(f"SELECT id FROM {kept_table}") == 7
    assert not reader.exists(target)


@pytest.mark.parametrize("mode", ["replace", "create", "overwrite_partitions"])
def test_a_durable_try_whose_worker_was_lost_is_published_by_the_next_without_its_query(
    stack, spark, reader, on_spark41, database, tmp_path, mode
):
    """durable=True: try 1 writes a staging table, records it and waits for the decision; its task
    and supervisor are SIGKILLed, the driver keeps the staging and exits. The source grows; try 2
    takes the staging over and publishes it without running the query (into the existing table in
    one fenced Delta commit, or renamed to a new one): the published rows are try 1's. With
    ``overwrite_partitions`` only the staged partition is replaced; the other stays as it was."""
    target, source = f"{database}.durable_{mode}", f"{database}.durable_source_{mode}"
    partitions: dict[str, Any] = {}
    if mode == "replace":
        reader.rows(f"CREATE TABLE {target} USING delta AS SELECT id FROM range(5)")
    elif mode == "overwrite_partitions":  # partition p=0 holds 0, 2, 4 and stays; p=1 is replaced
        reader.rows(f"CREATE TABLE {target} USING delta PARTITIONED BY (p) AS SELECT id, id % 2 AS p FROM range(5)")
        partitions = {"partition_by": ["p"]}
    reader.rows(f"CREATE TABLE {source} USING delta AS SELECT id FROM range(40)")
    dag_id, run_id = f"delta_durable_{mode}", "durable_run"
    sql = f"SELECT id, 1 AS p FROM {source}" if partitions else f"SELECT id FROM {source}"
    make_dag(dag_id, retries=2, target_table=target, mode=mode, sql=sql,
             table_format="delta", conf=on_spark41, durable=True, **partitions)  # fmt: skip
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "before_decision": {"sleep": 600, "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "before_decision try=1", timeout=240)
    first.signal_group(signal.SIGKILL)
    assert first.wait().startswith("killed")
    wait_for_drivers_to_exit(target)
    [staging] = reader.staging_tables(database)
    kept = database_dir(spark, database) / staging
    assert (kept / "_airflow_ctas_prepared.json").exists(), "the driver dropped what its lost task had prepared"
    reader.rows(f"INSERT INTO {source} SELECT id FROM range(40, 100)")

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try2.log").start()
    assert second.wait() == "success"
    log = (tmp_path / "try2.log").read_text(errors="replace")
    assert "adopted the staging of try 1; the query did not run" in log
    assert reader.value(f"SELECT count(*) FROM {target}") == 40 + (3 if partitions else 0), "try 1's rows"
    if partitions:
        assert reader.value(f"SELECT count(*) FROM {target} WHERE p = 0") == 3, "an unstaged partition changed"
    txn = xcom_value(dag_id, run_id, "ctas_transaction")
    assert (txn["outcome"], txn["try_number"], txn["details"]["adopted_from_try"]) == ("published", 2, 1), txn
    operations = [h["operation"] for h in reader.history(target)]
    if mode == "replace":  # try 2's one commit of try 1's staged rows
        assert operations[0] == "CREATE OR REPLACE TABLE AS SELECT", operations
    elif partitions:  # try 2's one write of the staged partition, try 1's begin (its fenced empty append)
        assert operations == ["WRITE", "WRITE", "CREATE TABLE AS SELECT"], operations
    else:  # try 1's staging table itself, its markers moved to try 2, renamed: one write in all
        assert operations == ["SET TBLPROPERTIES", "WRITE", "CREATE TABLE"], operations
    assert _leftovers(spark, reader, database) == [] and not kept.exists()
    published = database_dir(spark, database) / target.rsplit(".", 1)[1]
    assert not (published / "_airflow_ctas_prepared.json").exists(), "the record went with the staging"
