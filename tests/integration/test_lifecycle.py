"""End-to-end guarantees of AtomicCtasOperator: real Airflow (dag.test), real spark-submit, real metastore."""

from __future__ import annotations

import json
import threading

import pytest

from airflow_provider_ctas.catalogs import load_two_phase_table
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.operators import XCOM_KEY
from tests.support.catalog import comments, count, fresh, leftovers, location, properties, table_exists
from tests.support.dags import make_dag, run_dag, state_store_value, xcom_value
from tests.support.faults import Reader
from tests.support.fixtures import CONNECT_CONN_ID, STOP_GRACE
from tests.support.processes import wait_for_line

pytestmark = pytest.mark.integration

ORDERS_SQL = """
SELECT id,
       CAST(id % 3 AS STRING) AS country,
       concat('customer-', id) AS name,
       CAST(id AS DOUBLE) * 1.5 AS amount
FROM range({n})
"""


def transaction(dag_id: str, run_id: str) -> dict:
    value = xcom_value(dag_id, run_id, XCOM_KEY)
    assert value is not None, "the transaction must be visible in XCom"
    return value


def test_create_publishes_exactly_the_select(stack, spark, database, monkeypatch):
    target = f"{database}.orders"
    sql = ORDERS_SQL.format(n=1000)
    dag = make_dag(
        "success_create",
        target_table=target,
        sql=sql + ";\n",
        partition_by=["country"],
        table_properties={"team": "data-eng", "quoted": "it's \\ fine"},
        conf={"spark.ui.enabled": "true"},  # the tests turn it off elsewhere
    )
    run = run_dag(dag)

    assert run.task_state == "success"
    expected = spark.sql(sql)
    published = fresh(spark).table(target)
    # Spark puts partition columns last, as a plain CTAS does.
    assert published.columns == ["id", "name", "amount", "country"]
    assert dict(published.dtypes) == dict(expected.dtypes)
    assert published.count() == 1000
    assert published.exceptAll(expected.select(*published.columns)).count() == 0
    assert expected.select(*published.columns).exceptAll(published).count() == 0

    txn = transaction("success_create", run.run_id)
    props = properties(spark, target)
    assert props["team"] == "data-eng"
    assert props["quoted"] == "it's \\ fine"
    assert props[markers.TXN_ID] == txn["txn_id"]
    assert props[markers.RUN_ID] == run.run_id
    assert props[markers.TRY_NUMBER] == "1"
    assert props[markers.ROW_COUNT] == "1000"
    assert txn["state"] == "committed" and txn["outcome"] == "published"
    assert txn["details"]["row_count"] == 1000
    assert txn["details"]["files"] >= 1 and txn["details"]["bytes"] > 0, "the write's own metrics"
    assert txn["details"]["finalized_at"]
    # Where it ran: the application id in the return value, its UI as the task's extra link.
    application = txn["details"]["spark_application"]
    assert application["id"].startswith("local-") and application["master"].startswith("local")
    assert application["version"] == __import__("pyspark").__version__
    assert xcom_value("success_create", run.run_id, "return_value")["spark_application_id"] == application["id"]
    link = xcom_value("success_create", run.run_id, "_link_SparkApplicationLink")
    assert link == application["ui"] and link.startswith("http://")
    assert leftovers(spark, database) == []


def test_the_application_link_outlives_the_application_on_the_history_server(stack, spark, database, tmp_path):
    """With event logs on and a History Server named (``spark.yarn.historyServer.address``), the
    task's link is the application's page there, which serves after the application ended."""
    import time
    import urllib.request

    from ctas_devstack.history_server import HistoryServer

    server = HistoryServer(tmp_path / "history", tmp_path / "events").start()
    try:
        conf = {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": server.logs.as_uri(),
            "spark.yarn.historyServer.address": server.address,
        }
        run = run_dag(make_dag("history_link", target_table=f"{database}.linked", sql="SELECT 1 AS id", conf=conf))
        assert run.task_state == "success"
        application = transaction("history_link", run.run_id)["details"]["spark_application"]
        link = xcom_value("history_link", run.run_id, "_link_SparkApplicationLink")
        assert link == f"http://{server.address}/history/{application['id']}/jobs/"
        # The application has ended; the server lists it within a rescan of its log directory (1 s).
        deadline, seen = time.monotonic() + 60, ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(link, timeout=10) as page:
                    seen = f"{page.status} " + page.read().decode(errors="replace")
            except OSError as exc:
                seen = str(exc)
            if seen.startswith("200 ") and f"spark_catalog.{database}.linked" in seen:
                break
            time.sleep(1)
        assert seen.startswith("200 ") and f"spark_catalog.{database}.linked" in seen, f"the page said: {seen[:300]}"
    finally:
        server.stop(STOP_GRACE)


def test_bad_column_fails_and_leaves_nothing(stack, spark, database):
    target = f"{database}.broken"
    dag = make_dag("bad_column", retries=2, target_table=target, sql="SELECT id, no_such_column FROM range(10)")
    run = run_dag(dag)

    assert run.task_state == "failed"
    assert run.try_number == 1, "a query that cannot analyse must not be retried"
    assert not table_exists(spark, target)
    assert leftovers(spark, database) == []
    txn = transaction("bad_column", run.run_id)
    assert txn["state"] == "aborted"
    assert txn["details"]["error"]["code"] == "QUERY_ERROR"
    assert "no_such_column" in txn["details"]["error"]["message"]


def test_a_query_that_fails_on_its_data_is_not_retried(stack, spark, database):
    target = f"{database}.raises"
    sql = "SELECT id FROM range(10) WHERE raise_error(concat('bad row ', id)) IS NULL"
    run = run_dag(make_dag("raises", retries=2, target_table=target, sql=sql))

    assert run.task_state == "failed"
    assert run.try_number == 1, "a query that fails the same way on every try must not be retried"
    assert not table_exists(spark, target)
    assert leftovers(spark, database) == []
    error = transaction("raises", run.run_id)["details"]["error"]
    assert error["code"] == "QUERY_FAILED"
    assert "USER_RAISED_EXCEPTION" in error["message"]


def test_retry_after_failure_past_the_write_needs_no_cleanup(stack, spark, database, monkeypatch, tmp_path):
    target = f"{database}.retried"
    progress = tmp_path / "progress"
    monkeypatch.setenv(
        "AIRFLOW_CTAS_FAULTS",
        json.dumps({"progress_file": str(progress), "after_prepare": {"raise": "disk full", "only_try": 1}}),
    )
    dag = make_dag("retry_after_write", retries=1, target_table=target, sql=ORDERS_SQL.format(n=500))
    run = run_dag(dag)

    lines = progress.read_text().splitlines()
    assert lines[0] == "after_prepare try=1", "try 1 must fail after writing"
    assert lines[1:] == [
        "result phases=begin,prepare,commit ok=False PUBLISH_FAILED",
        "result phases=begin,prepare,commit ok=True ",
    ]
    assert run.task_state == "success" and run.try_number == 2
    assert count(spark, target) == 500
    assert properties(spark, target)[markers.TRY_NUMBER] == "2"
    assert leftovers(spark, database) == []
    durable = state_store_value("retry_after_write", run.run_id, XCOM_KEY)
    states = [(entry["try_number"], entry["state"]) for entry in durable["history"]]
    # The fault fires inside prepare, after the INSERT: try 1 never reached 'prepared'.
    assert states == [(1, "begun"), (1, "aborted"), (2, "begun"), (2, "prepared"), (2, "committed")]


def test_create_on_foreign_table_fails_before_any_spark_job(stack, spark, database):
    target = f"{database}.foreign"
    spark.sql(f"CREATE TABLE {target} USING parquet TBLPROPERTIES ('mine'='yes') AS SELECT 42 AS answer")
    # If the SELECT ran, the job would fail with 'the job ran' instead of the expected error.
    sql = "SELECT id, CASE WHEN id >= 0 THEN raise_error('the job ran') ELSE 'x' END AS x FROM range(10)"
    dag = make_dag("create_on_foreign", retries=2, target_table=target, sql=sql)
    run = run_dag(dag)

    assert run.task_state == "failed" and run.try_number == 1
    txn = transaction("create_on_foreign", run.run_id)
    assert txn["details"]["error"]["code"] == "TARGET_EXISTS"
    assert "created by someone other than airflow-provider-ctas" in txn["details"]["error"]["message"]
    assert txn["details"]["spark_jobs"] == 0
    assert fresh(spark).table(target).collect()[0]["answer"] == 42
    assert properties(spark, target)["mine"] == "yes"
    assert markers.TXN_ID not in properties(spark, target)
    assert leftovers(spark, database) == []


def test_replace_keeps_old_version_readable_until_publish(stack, spark, database, monkeypatch, tmp_path):
    target = f"{database}.dim"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 'old' AS version FROM range(300)")
    old_dir = location(spark, target)
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"after_prepare": {"sleep": 4}}))
    dag = make_dag(
        "replace_isolation",
        target_table=target,
        mode="replace",
        sql="SELECT id, 'new' AS version FROM range(1234)",
    )
    reader = Reader(spark, target, interval=0.05, tail=1).start()
    run = run_dag(dag)
    values = reader.stop()

    assert run.task_state == "success"
    assert values[0] == 300 and values[-1] == 1234
    assert set(values) == {300, 1234}, f"a reader saw something other than old or new: {set(values)}"
    first_new = values.index(1234)
    assert all(v == 1234 for v in values[first_new:]), "once published, the new version stays"
    # Several reads of the old version, not a figure a loaded machine can miss (16 of 20 once).
    assert values.count(300) >= 3, "the reader must have watched the old version while the job ran"
    txn = transaction("replace_isolation", run.run_id)
    assert txn["details"]["publish"]["mechanism"] == "flip"
    # The old version was not created by this provider: no table points at it, but it is not deleted.
    kept = txn["details"]["superseded_kept"]
    assert len(kept) == 1 and kept[0].rstrip("/").endswith(str(old_dir)), kept
    assert old_dir.exists() and location(spark, target) != old_dir
    assert leftovers(spark, database) == []


def test_second_replace_without_retention_deletes_the_version_it_supersedes(stack, spark, database):
    target = f"{database}.daily_dim"
    sql = "SELECT id, id * 2 AS twice FROM range({n})"
    first = run_dag(
        make_dag(
            "replace_first",
            target_table=target,
            mode="replace",
            sql=sql.format(n=10),
            comment="one row per id",
            column_comments={"id": "the id", "twice": "2 x id"},
        )
    )
    first_dir = location(spark, target)
    assert comments(spark, target) == ("one row per id", {"id": "the id", "twice": "2 x id"}), "created with them"
    spark.sql(f"ALTER TABLE {target} ALTER COLUMN twice COMMENT 'documented by hand'")
    second = run_dag(
        make_dag("replace_second", target_table=target, mode="replace", sql=sql.format(n=20),
                 superseded_retention=0, column_comments={"id": "the key"})
    )  # fmt: skip

    assert first.task_state == second.task_state == "success"
    assert count(spark, target) == 20
    assert transaction("replace_first", first.run_id)["details"]["publish"]["mechanism"] == "rename"
    assert transaction("replace_second", second.run_id)["details"]["publish"]["mechanism"] == "flip"
    assert comments(spark, target) == ("one row per id", {"id": "the key", "twice": "documented by hand"}), (
        "a replace keeps the comments it is not given and changes the one it is"
    )
    assert not first_dir.exists(), "the superseded version was created by this provider and must go"
    assert leftovers(spark, database) == []


def test_replace_with_new_shape_needs_allow_swap(stack, spark, database):
    target = f"{database}.reshaped"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id FROM range(5)")
    sql = "SELECT id, CASE WHEN id >= 0 THEN raise_error('the job ran') ELSE 'x' END AS extra FROM range(9)"
    run = run_dag(make_dag("reshape_refused", retries=1, target_table=target, mode="replace", sql=sql))

    assert run.task_state == "failed" and run.try_number == 1
    error = transaction("reshape_refused", run.run_id)["details"]["error"]
    assert error["code"] == "UNSUPPORTED_TARGET" and "allow_swap" in error["message"]
    assert transaction("reshape_refused", run.run_id)["details"]["spark_jobs"] == 0
    assert count(spark, target) == 5
    assert leftovers(spark, database) == []


# Over Connect (the same executor as a spark-submit driver, one server JVM); spark-submit swaps run
# under a reader in test_fault_matrix's swap cells.
@pytest.mark.parametrize("conn_id", [CONNECT_CONN_ID])
def test_replace_swap_when_allowed(stack, spark, database, monkeypatch, conn_id, request):
    if conn_id == CONNECT_CONN_ID:
        request.getfixturevalue("connect_server")
    target = f"{database}.swapped"
    created = run_dag(
        make_dag(f"swap_seed_{conn_id}", target_table=target, sql="SELECT id FROM range(300)", conn_id=conn_id,
                 comment="swapped daily", column_comments={"id": "the id"})
    )  # fmt: skip
    assert created.task_state == "success"
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({"after_prepare": {"sleep": 3}}))
    dag = make_dag(
        f"swap_allowed_{conn_id}",
        target_table=target,
        mode="replace",
        allow_swap=True,
        partition_by=["part"],
        sql="SELECT id, id % 4 AS part FROM range(1234)",
        conn_id=conn_id,
    )
    reader = Reader(spark, target, interval=0.05, tail=1).start()
    run = run_dag(dag)
    reader.stop()
    seen = reader.seen

    assert run.task_state == "success"
    values = [v for *_, v in seen]
    assert values[0] == 300 and values[-1] == 1234
    # The documented window of a swap: the table missing, empty, or a read that straddled a rename
    # failing (files moved under it, or the table gone between two metastore calls of one lookup).
    window = {0, "missing", "files-gone", "unavailable"}
    assert set(values) <= {300, 1234} | window, f"a reader saw {set(values)}; errors: {reader.unavailable[:3]}"
    txn = transaction(f"swap_allowed_{conn_id}", run.run_id)
    assert txn["details"]["publish"]["mechanism"] == "swap"
    gap = [(started, finished) for started, finished, v in seen if v in window]
    if gap:  # the documented window, only around the publish: a read that saw it overlapped the publish
        span = min(finished for _, finished in gap), max(started for started, _ in gap)
        assert span[1] - span[0] <= txn["details"]["publish"]["seconds"] + 0.5, (span, seen, reader.unavailable)
    assert fresh(spark).table(target).columns == ["id", "part"]
    assert comments(spark, target) == ("swapped daily", {"id": "the id"}), "the swapped-in table keeps them"
    assert leftovers(spark, database) == []


# Over Connect; the same faults on spark-submit are test_fault_matrix's raise-publish-flip and -swap.
@pytest.mark.parametrize(
    ("mode", "allow_swap", "fault", "conn_id"),
    [
        ("replace", False, "before_publish", CONNECT_CONN_ID),
        ("replace", True, "publish_after_move_aside", CONNECT_CONN_ID),
    ],
)
def test_failed_replace_publish_fails_the_task_and_keeps_the_old_version(
    stack, spark, database, monkeypatch, mode, allow_swap, fault, conn_id, request
):
    if conn_id == CONNECT_CONN_ID:
        request.getfixturevalue("connect_server")
    target = f"{database}.kept_{fault}"
    spark.sql(f"CREATE TABLE {target} USING parquet TBLPROPERTIES ('v'='1') AS SELECT id FROM range(50)")
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps({fault: {"raise": "metastore hiccup"}}))
    sql = "SELECT id, 1 AS extra FROM range(99)" if allow_swap else "SELECT id FROM range(99)"
    dag_id = f"publish_fails_{fault}_{conn_id}"
    dag = make_dag(dag_id, target_table=target, mode=mode, allow_swap=allow_swap, sql=sql, conn_id=conn_id)
    run = run_dag(dag)

    assert run.task_state == "failed"
    assert count(spark, target) == 50
    props = properties(spark, target)
    assert props["v"] == "1" and markers.SUPERSEDED_BY not in props and markers.TXN_ID not in props
    assert leftovers(spark, database) == []
    txn = transaction(dag_id, run.run_id)
    assert txn["state"] == "aborted"
    assert txn["details"]["error"]["code"] == "PUBLISH_FAILED"


def test_create_publish_conflict_fails_the_task_and_leaves_winner(stack, spark, database, monkeypatch, tmp_path):
    target = f"{database}.contested"
    progress = tmp_path / "progress"
    monkeypatch.setenv(
        "AIRFLOW_CTAS_FAULTS", json.dumps({"progress_file": str(progress), "after_prepare": {"sleep": 6}})
    )
    dag = make_dag("create_conflict", retries=1, target_table=target, sql="SELECT id FROM range(10)")

    def competitor() -> None:
        wait_for_line(progress, "after_prepare try=1", timeout=180)
        spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT 'winner' AS who")

    thread = threading.Thread(target=competitor, daemon=True)
    thread.start()
    run = run_dag(dag)
    thread.join(timeout=5)

    assert run.task_state == "failed" and run.try_number == 1
    assert fresh(spark).table(target).collect()[0]["who"] == "winner"
    assert leftovers(spark, database) == []
    txn = transaction("create_conflict", run.run_id)
    assert txn["details"]["error"]["code"] == "TARGET_EXISTS"
    assert "while this task ran" in txn["details"]["error"]["message"]


def test_xcom_round_trips_and_holds_no_secret(stack, spark, database, monkeypatch):
    secrets = ["pw-7f3a9c", "tok-19bd77", "a2V5dGFiLXNlY3JldA=="]
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_SECRET",
        json.dumps(
            {
                "conn_type": "spark",
                "host": "local[2]",
                "login": "etl",
                "password": secrets[0],
                "extra": {"token": secrets[1], "keytab_b64": secrets[2]},
            }
        ),
    )
    assert_no_secret_at_rest(f"{database}.secretless", "spark_secret", secrets)


def test_connect_token_stays_out_of_xcom(stack, connect_server, spark, database):
    """The Connect server checks a token; it is the connection's password and nothing stores it."""
    assert connect_server.token
    assert_no_secret_at_rest(f"{database}.secretless_connect", CONNECT_CONN_ID, [connect_server.token])


def assert_no_secret_at_rest(target: str, conn_id: str, secrets: list[str]) -> None:
    dag_id = f"no_secrets_{conn_id}"
    run = run_dag(make_dag(dag_id, target_table=target, conn_id=conn_id, sql="SELECT 1 AS one"))

    assert run.task_state == "success"
    for stored in (transaction(dag_id, run.run_id), state_store_value(dag_id, run.run_id, XCOM_KEY)):
        text = json.dumps(stored)
        assert not any(secret in text for secret in secrets)
        table = load_two_phase_table(stored)
        assert load_two_phase_table(json.loads(table.to_json())) == table
        assert table.conn_id == conn_id and str(table.target) == f"spark_catalog.{target}"


def test_invalid_rendered_target_fails_before_spark(stack, spark, database, monkeypatch):
    from airflow_provider_ctas.runners import spark_submit

    started: list = []

    def tripwire(*args, **kwargs):
        started.append(args)
        raise AssertionError("Spark work was started for an invalid target")

    monkeypatch.setattr(spark_submit.SparkSubmitRunner, "run", tripwire)
    dag = make_dag(
        "invalid_rendered_target",
        retries=2,
        target_table=database + ".{{ 'x; DROP TABLE y' }}",
        sql="SELECT 1 AS one",
    )
    run = run_dag(dag)

    assert started == []
    assert run.task_state == "failed" and run.try_number == 1, "invalid input must not be retried"
    assert xcom_value("invalid_rendered_target", run.run_id, XCOM_KEY) is None
    assert leftovers(spark, database) == []
