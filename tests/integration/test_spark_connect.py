"""The guarantees over Spark Connect (``spark_connect`` connections): the same phases, no spark-submit.

Fault injection over Connect (killed task processes, on_kill) is in the fault matrix, cells
``connect-*``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError, UnsupportedTargetError
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.runners.spark_connect import connect_mode_confined
from tests.support.catalog import (
    count,
    fresh,
    leftovers,
    location,
    marker_text,
    properties,
    retained_until,
    table_exists,
)
from tests.support.dags import DAGS_FOLDER, make_dag, run_dag, xcom_value
from tests.support.faults import Reader, Trial, check_observations
from tests.support.fixtures import CONNECT_CONN_ID
from tests.support.phases import executor_for, held_at, run_all
from tests.support.processes import find_processes, wait_for_line

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.connect]


def transaction(dag_id: str, run_id: str) -> dict:
    value = xcom_value(dag_id, run_id, "ctas_transaction")
    assert value is not None
    return value


def test_create_over_connect_is_atomic(stack, connect_server, spark, database):
    target = f"{database}.orders"
    sql = "SELECT id, CAST(id % 3 AS STRING) AS country, id * 1.5 AS amount FROM range(0, 5000, 1, 4)"
    checks = [{"type": "not_null", "columns": ["country"]}]
    dag = make_dag(
        "connect_create", target_table=target, sql=sql, conn_id=CONNECT_CONN_ID, partition_by=["country"], checks=checks
    )
    reader = Reader(spark, target, interval=0.1).start()
    run = run_dag(dag)
    values = reader.stop()

    assert run.task_state == "success"
    assert check_observations(values, {"missing", 5000}, 5000) is None, values
    assert values[-1] == 5000
    txn = transaction("connect_create", run.run_id)
    assert txn["details"]["row_count"] == 5000
    assert [(c["value"], c["note"]) for c in txn["details"]["checks"]] == [(0, "measured by the write")]
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert txn["details"]["spark_application"]["id"].startswith("local-"), "the Connect server's application"
    assert properties(spark, target)[markers.TXN_ID] == txn["txn_id"]
    assert leftovers(spark, database) == []
    assert not find_processes("org.apache.spark.deploy.SparkSubmit", target), "no spark-submit over Connect"
    # The same process then runs a spark-submit task: Connect mode must not leak into its driver.
    after = run_dag(make_dag("submit_after_connect", target_table=f"{database}.after", sql="SELECT 1 AS one"))
    assert after.task_state == "success"


def test_a_check_that_fails_over_connect_stops_the_write_and_is_reported_with_its_count(
    stack, connect_server, spark, database
):
    """The guard's error reaches the client through Connect: the write is stopped, written again to
    count, and the check fails with its count and sample, nothing published."""
    target = f"{database}.rejected"
    sql = "SELECT id, IF(id % 100 = 7, NULL, CAST(id % 3 AS STRING)) AS country FROM range(0, 1000, 1, 4)"
    checks = [{"type": "row_count", "min": 1}, {"type": "not_null", "columns": ["country"]}]
    run = run_dag(make_dag("connect_rejected", target_table=target, sql=sql, conn_id=CONNECT_CONN_ID, checks=checks))

    assert run.task_state == "failed"
    txn = transaction("connect_rejected", run.run_id)
    assert txn["details"]["error"]["code"] == "AUDIT_FAILED", txn["details"]["error"]
    results = {c["name"]: c for c in txn["details"]["checks"]}
    assert [(c["passed"], c["value"]) for c in results.values()] == [(True, 1000), (False, 10)]
    sample = {row["id"] for row in results["not_null(country)"]["sample"]}
    assert len(sample) == 5 and sample <= {str(i) for i in range(7, 1000, 100)}, sample
    assert not table_exists(spark, target)
    assert leftovers(spark, database) == []


def test_replace_over_connect_flips_and_deletes_what_it_superseded(stack, connect_server, spark, database, monkeypatch):
    target = f"{database}.dim"
    first = run_dag(make_dag("connect_replace_1", target_table=target, mode="replace", sql="SELECT id FROM range(300)",
                             conn_id=CONNECT_CONN_ID))  # fmt: skip
    first_dir = location(spark, target)
    # Long enough for a few reads on a loaded machine (3 s once allowed a single one).
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"after_prepare": {"sleep": 5}}))
    reader = Reader(spark, target, interval=0.1).start()
    second = run_dag(make_dag("connect_replace_2", target_table=target, mode="replace", superseded_retention=0,
                              sql="SELECT id FROM range(1234)", conn_id=CONNECT_CONN_ID))  # fmt: skip
    values = reader.stop()

    assert first.task_state == second.task_state == "success"
    assert check_observations(values, {300, 1234}, 1234) is None, values
    assert values.count(300) >= 2, "the reader watched the old version while the job ran"
    txn = transaction("connect_replace_2", second.run_id)
    assert txn["details"]["publish"]["mechanism"] == "flip"
    assert not first_dir.exists(), "the superseded version (created by this provider) is deleted by the metastore"
    new_dir = location(spark, target)
    parts = sorted((new_dir / markers.MARKER_FILE).glob("part-*"), key=lambda p: (p.stat().st_mtime, p.name))
    assert len(parts) == 2, "over Connect a marker is a directory; publishing added a newer part"
    marker = markers.MarkerFile.parse(parts[-1].read_text())
    assert marker is not None and marker.txn_id == txn["txn_id"] and marker.published_at
    stamped = properties(spark, target)
    assert (stamped[markers.TXN_ID], stamped[markers.DAG_ID], stamped[markers.ROW_COUNT]) == (
        txn["txn_id"],
        "connect_replace_2",
        "1234",
    ), "the flip's provenance, recorded after it over Connect"
    assert leftovers(spark, database) == []


def test_overwrite_partitions_over_connect(stack, connect_server, spark, database):
    target = f"{database}.events"

    def day(dag_id: str, ds: str, rows: int):
        sql = f"SELECT id, '{ds}' AS ds FROM range({rows})"
        dag = make_dag(dag_id, target_table=target, mode="overwrite_partitions", partition_by=["ds"], sql=sql,
                       conn_id=CONNECT_CONN_ID)  # fmt: skip
        return run_dag(dag)

    assert day("connect_parts_1", "2024-01-01", 100).task_state == "success"
    assert day("connect_parts_2", "2024-01-02", 50).task_state == "success"
    old = Path(urlparse(_partition_location(spark, target, "2024-01-01")).path)
    again = day("connect_parts_3", "2024-01-01", 130)

    assert again.task_state == "success"
    assert transaction("connect_parts_3", again.run_id)["details"]["publish"]["partitions"] == ["ds=2024-01-01"]
    assert count(spark, target, "ds = '2024-01-01'") == 130
    assert count(spark, target, "ds = '2024-01-02'") == 50
    # Kept for readers that listed its files before the switch (default retention: one hour).
    assert old.exists() and retained_until(old) is not None, "the superseded partition is kept, with its record"
    assert leftovers(spark, database) == []


def test_several_partitions_over_connect_switch_or_all_switch_back(stack, connect_server, spark, database, monkeypatch):
    """Over Connect each existing partition switches in its own statement; a failure after some of
    them ran switches every one of those back."""
    target = f"{database}.days"
    days = [f"2024-01-0{d}" for d in range(1, 6)]
    sql = "SELECT id, concat('2024-01-0', CAST(id % 5 + 1 AS STRING)) AS ds FROM range({n})"

    def load(dag_id: str, rows: int):
        dag = make_dag(dag_id, target_table=target, mode="overwrite_partitions", partition_by=["ds"],
                       sql=sql.format(n=rows), conn_id=CONNECT_CONN_ID, superseded_retention=0)  # fmt: skip
        return run_dag(dag)

    assert load("connect_days_1", 50).task_state == "success"
    before = {ds: _partition_location(spark, target, ds) for ds in days}

    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"publish_between_partitions": {"raise": "boom"}}))
    failed = load("connect_days_2", 100)
    assert failed.task_state == "failed"
    error = transaction("connect_days_2", failed.run_id)["details"]["error"]
    assert error["code"] == "PUBLISH_FAILED" and "switched back" in error["message"], error
    assert {ds: _partition_location(spark, target, ds) for ds in days} == before
    assert count(spark, target) == 50
    assert leftovers(spark, database) == []

    monkeypatch.delenv("AIRFLOW_CTAS_FAULTS")
    ok = load("connect_days_3", 100)
    assert ok.task_state == "success"
    published = transaction("connect_days_3", ok.run_id)["details"]["publish"]
    assert published["partitions"] == [f"ds={ds}" for ds in days]
    assert count(spark, target) == 100
    assert all(_partition_location(spark, target, ds) != before[ds] for ds in days)
    assert not any(Path(urlparse(location).path).exists() for location in before.values()), "superseded data"
    assert leftovers(spark, database) == []


def _partition_location(spark, target: str, ds: str) -> str:
    rows = fresh(spark).sql(f"DESCRIBE TABLE EXTENDED {target} PARTITION (ds = '{ds}')").collect()
    return next(r["data_type"] for r in rows if r["col_name"] == "Location")


def test_bad_query_over_connect_fails_and_leaves_nothing(stack, connect_server, spark, database):
    target = f"{database}.broken"
    sql = "SELECT id, CAST(CASE WHEN id > 5 THEN raise_error('boom') END AS STRING) AS x FROM range(10)"
    run = run_dag(make_dag("connect_bad", retries=1, target_table=target, sql=sql, conn_id=CONNECT_CONN_ID))

    assert run.task_state == "failed" and run.try_number == 1, "a query that fails on its data is not retried"
    txn = transaction("connect_bad", run.run_id)
    assert txn["state"] == "aborted"
    assert txn["details"]["error"]["code"] == "QUERY_FAILED"
    assert "boom" in txn["details"]["error"]["message"]
    assert not table_exists(spark, target)
    assert leftovers(spark, database) == []


def test_a_connection_without_the_token_is_refused_and_leaves_nothing(
    stack, connect_server, spark, database, monkeypatch
):
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CONNECT_NO_TOKEN",
        json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": connect_server.port}),
    )
    target = f"{database}.unauthenticated"
    run = run_dag(
        make_dag("connect_no_token", target_table=target, sql="SELECT 1 AS one", conn_id="spark_connect_no_token")
    )

    assert run.task_state == "failed"
    txn = transaction("connect_no_token", run.run_id)
    assert txn["details"]["error"]["message"].startswith("UNAUTHENTICATED"), txn["details"]["error"]
    assert not table_exists(spark, target)
    assert leftovers(spark, database) == []


def test_a_durable_try_killed_before_its_publish_over_connect_is_published_by_the_next(
    stack, connect_server, spark, database, tmp_path
):
    """durable=True over Spark Connect: the phases run in the task process, which is SIGKILLed (with
    its process group) after it recorded its staging and right before its publish. The staging and
    its record stay; the source grows; try 2 takes the staging over and publishes try 1's rows
    without running the query."""
    dag_id, run_id = "connect_durable", "durable_run"
    target, source = f"{database}.connect_durable", f"{database}.connect_durable_source"
    spark.sql(f"CREATE TABLE {source} USING parquet AS SELECT id FROM range(100)")
    make_dag(dag_id, retries=1, target_table=target, sql=f"SELECT id FROM {source}", conn_id=CONNECT_CONN_ID,
             durable=True)  # fmt: skip
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "before_publish": {"sleep": 600, "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "before_publish try=1", timeout=240)
    first.signal_group(signal.SIGKILL)
    assert first.wait().startswith("killed")
    kept = leftovers(spark, database)
    assert len(kept) == 1 and "_s1" in kept[0], f"try 1's staging was not kept: {kept}"
    spark.sql(f"INSERT INTO {source} SELECT id FROM range(100, 150)")

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try2.log").start()
    assert second.wait() == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    txn = transaction(dag_id, run_id)
    assert (txn["outcome"], txn["try_number"], txn["details"]["adopted_from_try"]) == ("published", 2, 1), txn
    notes = [p["note"] for p in txn["details"]["phases"]]
    assert "adopted the staging of try 1; the query did not run" in notes, notes
    assert count(spark, target) == 100, "try 1's rows, not the grown source's"
    assert leftovers(spark, database) == []


@pytest.fixture
def connect_spark(connect_server):
    """A Spark Connect session in this process, as the Connect runner makes one in a task process;
    the environment pyspark sets for it is put back afterwards (it would turn later classic sessions
    of this worker into Connect ones)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from pyspark.sql import SparkSession

    with connect_mode_confined():
        session = SparkSession.builder.remote(SparkConnectHook(conn_id=CONNECT_CONN_ID).get_connection_url()).create()
        try:
            yield session
        finally:
            session.stop()


@pytest.mark.parametrize("mode", ["replace", "overwrite_partitions"])
def test_a_switch_undone_over_connect_after_a_newer_try_published_restores_the_newer_version(
    connect_spark, spark, database, tmp_path: Path, mode: str
):
    """The chaos soak's window over Connect: this try checks its staging and stalls right before it
    flips the table or switches its partition; a newer try publishes meanwhile. Released, this try
    switches, finds its staging revoked, and switches back to what the table or partition pointed at
    right before its switch (the newer try's version), read in the statement before it; what it read
    before it stalled would undo the newer publish."""
    target, newer = f"{database}.contested_{mode}", tmp_path / "newer_try"
    flag, progress = tmp_path / "go", tmp_path / "progress"
    faults = {"publish_checked": {"wait_for": str(flag)}, "progress_file": str(progress)}
    if mode == "replace":
        spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id FROM range(3)")
        executor = executor_for(connect_spark, target, "SELECT id FROM range(7)", mode=mode, faults=faults)
        newer_publish = f"ALTER TABLE {target} SET LOCATION '{newer}'"
    else:
        spark.sql(f"CREATE TABLE {target} USING parquet PARTITIONED BY (ds) AS SELECT id, 'a' AS ds FROM range(3)")
        executor = executor_for(connect_spark, target, "SELECT id, 'a' AS ds FROM range(7)", mode=mode,
                                partition_by=["ds"], faults=faults)  # fmt: skip
        newer = newer / "ds=a"
        newer_publish = f"ALTER TABLE {target} PARTITION (ds = 'a') SET LOCATION '{newer}'"  # a path: no %3D
    with held_at(executor, "publish_checked", flag, progress) as failures:
        # A newer try's begin revokes this try's staging (a marker is written as the Connect engine
        # writes one); its publish switches the table or the partition.
        client = CatalogClient(connect_spark)
        staging = executor.ctx.staging_directory or ""
        marker = client.read_marker(staging)
        assert marker is not None
        client.fs.write_text(f"{staging}/{markers.MARKER_FILE}", dataclasses.replace(marker, revoked_by=2).to_json())
        spark.range(50).write.parquet(str(newer))
        spark.sql(newer_publish)
        assert count(spark, target) == 50

    assert len(failures) == 1 and isinstance(failures[0], FencedError), failures
    assert count(spark, target) == 50, "the newer try's publish stands"


@contextlib.contextmanager
def round_trips(session: Any) -> Iterator[list[tuple[str, str]]]:
    """What a Connect session's client sends to the server meanwhile, one entry per request (from
    any thread): the plan's type and kind (``("command", "sql_command")``), or the analysis asked
    for (``("analyze", "schema")``)."""
    client, sent, lock = session.client, [], threading.Lock()
    execute, analyze = client._execute_and_fetch, client._analyze

    def executed(request: Any, *args: Any, **kwargs: Any) -> Any:
        plan = request.plan
        kind = plan.command.WhichOneof("command_type") if plan.HasField("command") else plan.root.WhichOneof("rel_type")
        with lock:
            sent.append((str(plan.WhichOneof("op_type")), str(kind)))
        return execute(request, *args, **kwargs)

    def analyzed(method: str, **kwargs: Any) -> Any:
        with lock:
            sent.append(("analyze", method))
        return analyze(method, **kwargs)

    client._execute_and_fetch, client._analyze = executed, analyzed
    try:
        yield sent
    finally:
        client._execute_and_fetch, client._analyze = execute, analyze


def test_a_command_s_rows_are_read_from_its_answer_over_connect(connect_spark, spark, database):
    """A command's rows come back with the command: reading them from the answer gives what
    ``collect()`` gives, without sending them back to the server (issue 53)."""
    from airflow_provider_ctas.spark.statements import statement_rows

    target = f"{database}.described"
    spark.sql(f"CREATE TABLE {target} (id BIGINT, name VARCHAR(8), ds STRING) USING parquet PARTITIONED BY (ds) "
              "TBLPROPERTIES ('note' = 'a, b=c')")  # fmt: skip
    spark.sql(f"INSERT INTO {target} VALUES (1, 'x', 'a')")
    for statement in (f"DESCRIBE TABLE EXTENDED {target}", f"SHOW TBLPROPERTIES {target}",
                      f"SHOW TABLES IN {database}", f"SHOW PARTITIONS {target}"):  # fmt: skip
        with round_trips(connect_spark) as sent:
            rows = statement_rows(connect_spark, statement)
        assert [op for op, _ in sent] == ["command"], f"{statement}: one round trip, not {sent}"
        assert rows == connect_spark.sql(statement).collect(), statement
        assert rows, statement
    with round_trips(connect_spark) as sent:
        assert statement_rows(connect_spark, f"SELECT count(1) AS n FROM {target}")[0]["n"] == 1
    assert [op for op, _ in sent] == ["command", "root"], "a query's rows are fetched by running it"


def test_the_connect_file_system_lists_and_reads_what_is_there_and_nothing_where_nothing_is(
    connect_spark, tmp_path: Path
):
    """A path that is not there answers empty, False or None, not an error (each listing now fails
    in its one query rather than in an analysis before it); a marker is not data."""
    from airflow_provider_ctas.spark.filesystem import ConnectFileSystem

    fs, root, missing = ConnectFileSystem(connect_spark), tmp_path / "root", tmp_path / "missing"
    fs.write_text(f"{root}/a/_marker", "first")
    fs.write_text(f"{root}/b", "second")
    assert fs.exists(str(root)) and fs.has_files(str(root))
    assert fs.list_names(str(root)) == ["a", "b"]
    written = [Path(path.removeprefix("file:")).relative_to(root).parts[0] for path, _ in fs.data_files(str(root))]
    assert written == ["b"], "a marker is not data"
    assert fs.read_text(f"{root}/a/_marker") == "first\n"
    assert fs.modified_at(f"{root}/a") > 0, "a directory holding only its marker"
    assert not fs.exists(str(missing)) and not fs.has_files(str(missing))
    assert fs.list_names(str(missing)) == [] and fs.data_files(str(missing)) == []
    assert fs.modified_at(str(missing)) == 0.0 and fs.read_text(str(missing)) is None


def test_both_file_systems_find_the_marked_directories_a_pattern_names(connect_spark, spark, tmp_path: Path):
    """What a try lists right before its publish for a newer try's staging: the directories with a
    hidden entry (a marker, a table's log), not those with data only, nor a name the pattern misses;
    over Spark Connect in one round trip."""
    from airflow_provider_ctas.spark.filesystem import ConnectFileSystem, HadoopFileSystem

    classic, over_connect, root = HadoopFileSystem(spark), ConnectFileSystem(connect_spark), tmp_path / "db"
    over_connect.write_text(f"{root}/s1/_marker", "x")  # a directory of part files, as over Connect
    for path in ("s2/_delta_log/0.json", "s3/part-0.parquet", "other/_marker"):
        classic.write_text(f"{root}/{path}", "x")
    assert classic.marked_names(str(root), "s*") == ["s1", "s2"]
    assert classic.marked_names(str(tmp_path / "missing"), "s*") == []
    with round_trips(connect_spark) as sent:
        assert over_connect.marked_names(str(root), "s*") == ["s1", "s2"]
    assert len(sent) == 1, sent
    assert over_connect.marked_names(str(tmp_path / "missing"), "s*") == []


def test_a_flip_s_commit_over_connect_is_twelve_round_trips(connect_spark, spark, database):
    """Each is a step of a guarantee (docs/costs.md, "Over Spark Connect"): the table read (its
    DESCRIBE and properties sent together), the listing of newer tries' staging, the fence, the
    location an undo would restore, the SET
    LOCATION, the re-check, the provenance (the location again, SET TBLPROPERTIES) beside the
    retention of the replaced version (its marker, its record), and the new version's marker,
    updated from the re-check's read beside that record's write. One more is a regression of issue
    53; one fewer, a step to account for."""
    target = f"{database}.counted_flip"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id FROM range(3)")
    run_all(executor_for(connect_spark, target, "SELECT id FROM range(5)", mode="replace"))
    executor = executor_for(connect_spark, target, "SELECT id FROM range(7)", mode="replace")
    for phase in ("begin", "prepare"):
        executor.run(phase, PhaseReport(phase, "ok", 0.0))
    with round_trips(connect_spark) as sent:
        executor.run("commit", PhaseReport("commit", "ok", 0.0))

    details = executor.ctx.details
    assert details.get("finalize_pending") is None
    assert sorted(kind for _, kind in sent) == sorted(
        ["sql_command"] * 6  # DESCRIBE, SHOW TBLPROPERTIES, DESCRIBE, SET LOCATION, DESCRIBE, SET TBLPROPERTIES
        + ["project"] * 4  # newer tries' staging, the staging marker twice (fence, re-check), the replaced one
        + ["write_operation"] * 2  # the replaced version's retention record, the new version's marker
    ), sent
    assert count(spark, target) == 7
    assert properties(spark, target)[markers.TXN_ID] == executor.table.txn_id, "the provenance, recorded beside"
    replaced = Path(urlparse(details["publish"]["previous_location"]).path)
    assert retained_until(replaced) is not None, "the replaced version, kept for readers"
    marker = markers.MarkerFile.parse(marker_text(Path(urlparse(details["location"]).path) / markers.MARKER_FILE))
    assert marker is not None and marker.try_number == executor.table.try_number
    assert marker.published_at and [r.path for r in marker.retained] == [details["publish"]["previous_location"]], (
        "the new version's marker, updated without reading it again: published, keeping the replaced one"
    )


def test_a_flip_over_connect_writes_with_the_target_s_options_and_refuses_redacted_ones(connect_spark, spark, database):
    """Over Connect the options come from ``DESCRIBE ... AS JSON`` (``DESCRIBE``'s own row joins
    them with ", ", as a separator may be); a value the server shows redacted cannot be repeated, so
    that table is refused before anything is written, and keeps its rows."""
    target, hidden = f"{database}.csv_options", f"{database}.csv_redacted"
    for table, extra in ((target, ""), (hidden, ", `auth.token` 'x'")):
        spark.sql(f"CREATE TABLE {table} (id BIGINT, s STRING) USING csv OPTIONS (sep ', ', header 'true'{extra})")
        spark.sql(f"INSERT INTO {table} VALUES (9, 'old')")
    sql = "SELECT id, concat('new, ', CAST(id AS STRING)) AS s FROM range(3)"

    run_all(executor_for(connect_spark, target, sql, mode="replace", table_format="csv"))
    assert sorted(tuple(r) for r in fresh(spark).table(target).collect()) == [
        (0, "new, 0"),
        (1, "new, 1"),
        (2, "new, 2"),
    ]
    with pytest.raises(UnsupportedTargetError, match=r"\['auth.token'\].*redacted"):
        run_all(executor_for(connect_spark, hidden, sql, mode="replace", table_format="csv"))
    assert [tuple(r) for r in fresh(spark).table(hidden).collect()] == [(9, "old")]
