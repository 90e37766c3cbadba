"""Cluster deploy mode on a real YARN (the dev stack's MiniYARNCluster, ctas_devstack/yarn.py): the
driver runs in a YARN container, listens, and announces its port in its log; the task finds it
through the ResourceManager and NodeManager, connects, and decides the commit (docs/design.md).
Nothing in the task process listens, so the driver never opens a connection to the worker."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.iceberg.group_table import GROUP
from airflow_provider_ctas.core import markers
from ctas_devstack.yarn import YarnCluster
from tests.support.catalog import count, fresh, leftovers, properties, table_exists
from tests.support.dags import DAGS_FOLDER, load_dag, make_dag, run_dag, xcom_value
from tests.support.delta import DeltaReader, delta_conf
from tests.support.faults import Reader, Trial, check_observations, summarize
from tests.support.fixtures import REST_CATALOG
from tests.support.format_scenarios import kill_task_at
from tests.support.iceberg import iceberg_jar, task_conf_on_spark41
from tests.support.iceberg import leftovers as iceberg_leftovers
from tests.support.jvm import SparkInstall, container_archive
from tests.support.processes import wait_for_line
from tests.support.reliability import NEW_ROWS, record_cell
from tests.support.spark_versions import SPARK_FOR_FORMATS, pyspark_venv
from tests.support.table_reader import TableReader
from tests.support.waiting import wait_until
from tests.support.yarn import ENDED, application, driver_pid, ended_application, processes, use_yarn, yarn_cluster

# One test worker runs the whole module: its module-scoped services start once, not on every worker.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.yarn,
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("yarn"),
]


@pytest.fixture(scope="module")
def yarn(metastore, rest, tmp_path_factory) -> Iterator[YarnCluster]:
    """The cluster in a network of its own: the task reaches it, it reaches the metastore service and
    the Iceberg REST catalog and nothing else of this host."""
    with yarn_cluster(tmp_path_factory.mktemp("yarn"), allow=(metastore.port, rest.port)) as cluster:
        yield cluster


def _network_of(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _writing(
    spark: Any,
    yarn: YarnCluster,
    on_yarn: dict[str, str],
    tmp_path: Any,
    dag_id: str,
    target: str,
    rows: int,
    **dag: Any,
) -> tuple[Trial, str, Reader]:
    """Try 1 of a DAG whose query writes ``rows`` slowly (100 ms a row, two tasks), followed until its
    driver in YARN has begun: its task, its application and a reader polling the target."""
    slow = f"SELECT id, reflect('java.lang.Thread', 'sleep', CAST(100 AS BIGINT)) AS pause FROM range(0, {rows}, 1, 2)"
    make_dag(dag_id, target_table=target, conn_id="spark_yarn", conf=on_yarn, sql=slow, **dag)
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "after_begin": {"sleep": 0}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "yarn_run", tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "after_begin try=1", timeout=300)
    return first, application(yarn, f"spark_catalog.{target}", 1)["id"], Reader(spark, target).start()


def _cell(cell_id: str, order: int, fault: str, when: str, mode: str, **result: Any) -> str | None:
    """Records a cluster-mode cell of the fault matrix; returns the readers' problem, if any.
    ``result``: try1, left1, try2, left2, values (the reader's), allowed, rows (published, or None),
    ok (what the test asserts besides the readers) and since (when the fault struck)."""
    values, rows = result.pop("values"), result["rows"]
    problem = check_observations(values, result.pop("allowed"), rows if rows is not None else NEW_ROWS)
    ok = result.pop("ok") and problem is None and not result["left2"]
    seconds = round(time.monotonic() - result.pop("since"))
    fault = f"YARN cluster deploy mode: {fault}"
    summary = {"seen": summarize(values), "ok": ok, "seconds": seconds, "problem": problem}
    record_cell(cell_id, {"order": order, "fault": fault, "when": when, "mode": mode, **result, **summary})
    return problem


def test_the_cluster_runs_in_a_network_that_cannot_reach_the_task_host(yarn, metastore):
    """What every test of this module runs on: a listener on this host (a task's, were it to open
    one) is out of the cluster's reach on every address, the metastore service is not, and the
    cluster's services run in that network."""
    network = yarn.network
    assert network is not None
    with socket.create_server(("0.0.0.0", 0)) as listener:
        port = listener.getsockname()[1]
        for host in (network.host_ip, "127.0.0.1", socket.gethostname()):
            assert not network.reaches(host, port), f"the cluster reached this host at {host}:{port}"
        assert socket.create_connection((network.host_ip, port), timeout=5), "this host reaches it"
    assert network.reaches("127.0.0.1", metastore.port), "the metastore service, the one allowed port"
    assert _network_of(int(yarn.pid_file.read_text())) == os.stat(f"/run/netns/{network.name}").st_ino
    assert _network_of(os.getpid()) != os.stat(f"/run/netns/{network.name}").st_ino


@pytest.fixture
def on_yarn(yarn, monkeypatch) -> dict[str, str]:
    return use_yarn(yarn, monkeypatch)


def _publish(yarn: YarnCluster, dag_id: str, app_target: str, mechanism: str, **dag: Any) -> dict[str, Any]:
    """One run on YARN that must publish by ``mechanism`` from its own application, which
    SUCCEEDED: the run's XCom transaction."""
    run = run_dag(make_dag(dag_id, conn_id="spark_yarn", **dag))
    txn = xcom_value(dag_id, run.run_id, "ctas_transaction")
    assert run.task_state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == mechanism, txn["details"]["publish"]
    app = application(yarn, app_target, 1)
    assert txn["details"]["spark_application"]["id"] == app["id"] and app["finalStatus"] == "SUCCEEDED", app
    return dict(txn)


def _adopted_after_a_lost_task(
    yarn: YarnCluster, tmp_path: Any, dag_id: str, app_target: str, mechanism: str, **dag: Any
) -> dict[str, Any]:
    """``durable=True``: try 1's driver in YARN writes and checks its staging; its task is SIGKILLed
    while the driver waits for the decision. The driver keeps the staging and ends without
    publishing; try 2 takes it over and publishes by ``mechanism`` without running the query: the
    run's XCom transaction."""
    make_dag(dag_id, conn_id="spark_yarn", retries=1, durable=True, **dag)
    kill_task_at(dag_id, "durable", "before_decision", dag["target_table"], tmp_path)
    app1 = application(yarn, app_target, 1)["id"]
    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "durable", tmp_path / "try2.log").start().wait()
    assert second == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    ended, app2 = ended_application(yarn, app1), application(yarn, app_target, 2)
    assert ended is not None and ended["finalStatus"] != "SUCCEEDED", "try 1's driver published, or claimed to"
    txn = xcom_value(dag_id, "durable", "ctas_transaction")
    assert txn["details"]["spark_application"]["id"] == app2["id"] and app2["finalStatus"] == "SUCCEEDED", app2
    assert txn["details"]["publish"]["mechanism"] == mechanism, txn["details"]["publish"]
    assert txn["details"]["adopted_from_try"] == 1, txn["details"]
    assert any("the query did not run" in p["note"] for p in txn["details"]["phases"]), txn["details"]["phases"]
    return dict(txn)


def test_cluster_mode_publishes_on_the_decision_of_the_task(stack, spark, database, yarn, on_yarn):
    target = f"{database}.on_yarn"
    dag = make_dag("yarn_create", target_table=target, conn_id="spark_yarn", conf=on_yarn,
                   sql="SELECT id, id % 3 AS k FROM range(300)")  # fmt: skip
    started = time.monotonic()
    run = run_dag(dag)
    txn = xcom_value("yarn_create", run.run_id, "ctas_transaction")
    assert run.task_state == "success", txn
    assert (txn["state"], txn["outcome"], txn["details"]["row_count"]) == ("committed", "published", 300)
    phases = {p["phase"]: p for p in txn["details"]["phases"]}
    assert list(phases) == ["begin", "prepare", "commit"], "the result came back on the channel"
    decided = re.fullmatch(r"the task decided commit in (\d+) ms", phases["commit"]["note"])
    assert decided is not None, phases["commit"]
    left, published = leftovers(spark, database), count(spark, target)
    record_cell(
        "yarn-cluster-no-fault",
        {
            "order": 119,
            "fault": "YARN cluster deploy mode: none (the decision's latency: the driver's *prepared* to the "
            "task's *commit*, over the channel the task opened)",
            "when": "-",
            "mode": "create",
            "try1": f"published; the task decided commit in {decided.group(1)} ms",
            "left1": left,
            "try2": "none",
            "left2": left,
            "seen": "-",
            "rows": published,
            "ok": published == 300 and not left,
            "seconds": round(time.monotonic() - started),
            "problem": None,
        },
    )
    assert count(spark, target) == 300
    assert properties(spark, target)[markers.TXN_ID] == txn["txn_id"]
    app = application(yarn, f"spark_catalog.{target}", 1)
    assert txn["details"]["spark_application"]["id"] == app["id"], "the driver ran in YARN"
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED")
    assert leftovers(spark, database) == []

    # A same-shape replace in place (a flip): the other publish mechanism, decided the same way, after
    # checks that ran in the driver and whose results came back over the channel.
    checks = [{"type": "row_count", "min": 100}, {"type": "unique", "columns": ["id"], "scope": "result"}]
    dag = make_dag("yarn_replace", target_table=target, conn_id="spark_yarn", conf=on_yarn, mode="replace",
                   sql="SELECT id, id % 5 AS k FROM range(120)", checks=checks)  # fmt: skip
    run = run_dag(dag)
    txn = xcom_value("yarn_replace", run.run_id, "ctas_transaction")
    assert run.task_state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "flip", txn["details"]["publish"]
    assert [p["phase"] for p in txn["details"]["phases"]] == ["begin", "prepare", "audit", "commit"]
    assert {c["name"]: (c["passed"], c["value"]) for c in txn["details"]["checks"]} == {
        "row_count": (True, 120), "unique(id)": (True, 0)}  # fmt: skip
    assert fresh(spark).table(target).count() == 120
    assert leftovers(spark, database) == []

    # A replace that changes the shape (a swap), then a partition overwrite: every publish
    # mechanism of a metastore table, each decided by the task over the channel.
    for dag_id, mode, sql, mechanism, expected in [
        ("yarn_swap", "replace", "SELECT id, 'x' AS extra, CAST(id % 2 AS STRING) AS k FROM range(80)", "swap",
         [["0", "x", 40], ["1", "x", 40]]),
        ("yarn_partitions", "overwrite_partitions", "SELECT id, 'y' AS extra, '1' AS k FROM range(7)", "partitions",
         [["0", "x", 40], ["1", "y", 7]]),
    ]:  # fmt: skip
        _publish(yarn, dag_id, f"spark_catalog.{target}", mechanism, target_table=target, conf=on_yarn, mode=mode,
                 partition_by=["k"], allow_swap=True, sql=sql)  # fmt: skip
        read = fresh(spark).sql(f"SELECT k, extra, count(*) FROM {target} GROUP BY k, extra ORDER BY k")
        assert [list(row) for row in read.collect()] == expected, mode
        assert leftovers(spark, database) == []

    # A partition overwrite whose checks fail in the driver: the task fails the try (AUDIT_FAILED, not
    # retried), nothing is published and the driver dropped its staging.
    run = run_dag(make_dag("yarn_audit_fails", target_table=target, conn_id="spark_yarn", conf=on_yarn, retries=1,
                           mode="overwrite_partitions", partition_by=["k"], checks=[{"type": "not_null",
                           "columns": ["extra"]}], sql="SELECT id, IF(id = 3, NULL, 'z') AS extra, '1' AS k "
                           "FROM range(9)"))  # fmt: skip
    txn = xcom_value("yarn_audit_fails", run.run_id, "ctas_transaction")
    assert (run.task_state, run.try_number) == ("failed", 1), txn
    assert (txn["state"], txn["details"]["error"]["code"]) == ("aborted", "AUDIT_FAILED"), txn["details"]
    assert [(c["name"], c["passed"], c["value"]) for c in txn["details"]["checks"]] == [("not_null(extra)", False, 1)]
    read = fresh(spark).sql(f"SELECT k, extra, count(*) FROM {target} GROUP BY k, extra ORDER BY k")
    assert [list(row) for row in read.collect()] == [["0", "x", 40], ["1", "y", 7]], "the failed audit published"
    assert leftovers(spark, database) == []


def test_a_durable_cluster_mode_driver_whose_task_died_mid_write_finishes_it_for_the_next_try(
    stack, spark, database, yarn, on_yarn, tmp_path
):
    """durable=True: the task process is SIGKILLed while its driver writes in a YARN container. The
    driver needs nothing of the worker to finish: it completes the write, keeps it and ends without
    publishing. Try 2 starts at once, finds try 1's application still running through the
    ResourceManager, waits for it to end, then takes the staging over and publishes it without
    running the query."""
    dag_id, target = "yarn_durable_mid_write", f"{database}.yarn_durable_mid_write"
    first, app1, reader = _writing(spark, yarn, on_yarn, tmp_path, dag_id, target, 300, durable=True, retries=1)
    time.sleep(3)  # the write is running
    os.kill(first.pid, signal.SIGKILL)
    struck = time.monotonic()
    assert yarn.app(app1)["state"] not in ENDED, "the write ended before the task was killed: nothing to finish"

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "yarn_run", tmp_path / "try2.log").start()
    assert second.wait() == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    log = (tmp_path / "try2.log").read_text(errors="replace")
    assert f"try 1's driver (YARN application {app1}" in log and "waiting for it to end" in log, log[-3000:]
    ended, app2 = yarn.app(app1), application(yarn, f"spark_catalog.{target}", 2)
    assert int(ended["finishedTime"]) <= int(app2["startedTime"]), "try 2's driver began beside try 1's"
    assert ended["finalStatus"] != "SUCCEEDED", "try 1's driver published, or claimed to"
    txn = xcom_value(dag_id, "yarn_run", "ctas_transaction")
    published, left = count(spark, target), leftovers(spark, database)
    problem = _cell(
        "yarn-cluster-durable-mid-write", 122, "durable=True, SIGKILL the task process while its driver writes, "
        "retries=1; try 2 starts at once", "mid-write", "create",
        try1=f"killed; its driver finished the write and kept it ({ended['finalStatus']})",
        left1=["try 1's staging, kept for try 2"],
        try2=f"waited for try 1's application, took over try {txn['details'].get('adopted_from_try')}'s staging",
        left2=left, values=reader.stop(), allowed={"missing", 300}, rows=published,
        ok=published == 300 and txn["details"].get("adopted_from_try") == 1,
        since=struck,
    )  # fmt: skip
    assert txn["details"]["adopted_from_try"] == 1, txn["details"]
    assert any("the query did not run" in p["note"] for p in txn["details"]["phases"]), txn["details"]["phases"]
    assert published == 300, "what try 1's driver finished writing after its task died"
    assert left == [] and problem is None, problem


def test_a_superseded_cluster_mode_try_cannot_publish_once_a_newer_try_began(
    stack, spark, database, yarn, on_yarn, tmp_path
):
    """Try 1's driver (in a YARN container) holds after it prepared, its task alive and waiting; try 2
    starts beside it, as a clear does, and publishes in cluster mode; then try 1 goes on and its task
    decides commit: its driver finds its staging taken over and publishes nothing (FENCED)."""
    dag_id, target = "yarn_zombie", f"{database}.yarn_zombie"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id FROM range(5)")
    make_dag(dag_id, target_table=target, conn_id="spark_yarn", conf=on_yarn, mode="replace", retries=3,
             sql="SELECT id FROM range(100)")  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    held = {"progress_file": str(progress), "after_prepare": {"wait_for": str(release), "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "yarn_run", tmp_path / "try1.log", held).start()
    try:
        wait_for_line(progress, "after_prepare try=1", timeout=300)
        reader = Reader(spark, target).start()
        struck = time.monotonic()
        second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "yarn_run", tmp_path / "try2.log").start()
        assert second.wait() == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
        assert count(spark, target) == 100
    finally:
        release.touch()
    try1 = first.wait()
    values = reader.stop()
    wait_for_line(progress, "result phases=begin,prepare,commit ok=False FENCED", timeout=120)
    assert try1 != "success", try1
    app1_id = application(yarn, f"spark_catalog.{target}", 1)["id"]
    app1 = wait_until("try 1's application ends", lambda: ended_application(yarn, app1_id), timeout=120)
    assert app1["finalStatus"] != "SUCCEEDED", app1
    txn = xcom_value(dag_id, "yarn_run", "ctas_transaction")
    published, left = count(spark, target), leftovers(spark, database)
    problem = _cell(
        "yarn-cluster-superseded-zombie", 123, "try 2 starts beside try 1, held alive after prepared (a clear); "
        "try 1's task then decides commit", "after prepared", "replace",
        try1=f"{try1}: its driver found its staging taken over (FENCED)", left1=[],
        try2="published", left2=left, values=values, allowed={5, 100}, rows=published,
        ok=published == 100 and app1["finalStatus"] != "SUCCEEDED",
        since=struck,
    )  # fmt: skip
    assert problem is None, problem
    assert published == 100, "try 2's version stays"
    assert (txn["try_number"], txn["state"]) == (2, "committed"), "the fenced try wrote no XCom over try 2's"
    assert left == []


def test_a_cluster_mode_driver_killed_mid_write_fails_its_try_and_the_next_try_publishes(
    stack, spark, database, yarn, on_yarn, tmp_path
):
    """The driver's container is SIGKILLed while it writes (the node lost, the container pre-empted):
    YARN does not start it again (one application attempt), the task fails the try without a
    publish, and the next try removes what the killed driver left and publishes."""
    dag_id, target = "yarn_driver_killed", f"{database}.yarn_driver_killed"
    first, app_id, reader = _writing(spark, yarn, on_yarn, tmp_path, dag_id, target, 200, retries=1)
    time.sleep(3)  # the write is running
    pid = wait_until("the driver's JVM is found", lambda: driver_pid(app_id), timeout=30)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    state = first.wait()
    seconds = time.monotonic() - killed
    assert state in ("failed", "up_for_retry"), state
    # A liveness bound, not a speed figure: far under the test's wait, so a task that hung until some
    # timeout fails here (108 s seen on a machine loaded twice over; 20-40 s on an idle one).
    assert seconds < 240, f"the task took {seconds:.0f}s to see its driver gone"
    app = wait_until("the application ends", lambda: ended_application(yarn, app_id), timeout=60)
    assert app["finalStatus"] != "SUCCEEDED", app
    assert not table_exists(spark, target)
    attempts = [a for a in yarn.apps() if a["name"] == f"airflow-ctas spark_catalog.{target} try 1"]
    assert len(attempts) == 1, "no second driver for the same try"
    left1 = leftovers(spark, database)

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "yarn_run", tmp_path / "try2.log").start()
    assert second.wait() == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    published, left = count(spark, target), leftovers(spark, database)
    problem = _cell(
        "yarn-cluster-driver-container-killed", 124, "SIGKILL the driver's container mid-write, retries=1",
        "mid-write", "create", try1=f"{state} {seconds:.0f}s after its driver died; one application attempt",
        left1=left1, try2="published", left2=left, values=reader.stop(), allowed={"missing", 200}, rows=published,
        ok=published == 200,
        since=killed,
    )  # fmt: skip
    assert published == 200 and problem is None, problem
    assert left == [], "the next try removed what the killed driver left"


def test_a_cluster_mode_try_whose_task_is_killed_mid_write_publishes_nothing_and_the_next_try_publishes(
    stack, spark, database, yarn, on_yarn, tmp_path
):
    """While the driver writes in a YARN container (in the cluster's network, which cannot reach the
    task), the task process is SIGKILLed: no on_kill, no abort; the orphaned driver sees the channel
    close, cancels its jobs, drops its staging and ends, and YARN frees its containers, all before
    any next try. Then try 2 publishes, and nothing is left. (A driver that dies from outside
    mid-write: the driver-container cell.)"""
    dag_id, target = "yarn_stop_task_killed", f"{database}.yarn_stop_task_killed"
    first, app_id, reader = _writing(spark, yarn, on_yarn, tmp_path, dag_id, target, 200, retries=1)
    time.sleep(3)  # the write is running
    driver = driver_pid(app_id)
    assert driver is not None and yarn.network is not None
    assert _network_of(driver) == os.stat(f"/run/netns/{yarn.network.name}").st_ino, "the driver cannot reach the task"
    struck = time.monotonic()
    os.kill(first.pid, signal.SIGKILL)
    app = wait_until("try 1's application ends", lambda: ended_application(yarn, app_id), timeout=120)
    ended = time.monotonic() - struck
    wait_until("no container of the application runs", lambda: not processes(app_id) or None, timeout=60)
    orphan_left = leftovers(spark, database)
    assert orphan_left == [], "the orphan dropped its staging itself"
    assert not table_exists(spark, target), "the orphan published"
    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "yarn_run", tmp_path / "try2.log").start()
    assert second.wait() == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    published, left = count(spark, target), leftovers(spark, database)
    problem = _cell(
        "yarn-cluster-task-killed-mid-write", 127,
        "SIGKILL the task process mid-write, retries=1; try 2 starts once try 1's application ended",
        "mid-write", "create", try1=f"killed; its orphaned driver's application ended {app['state']} {ended:.0f}s "
        "later", left1=orphan_left,
        try2="published", left2=left, values=reader.stop(), allowed={"missing", 200}, rows=published,
        ok=published == 200 and app["finalStatus"] != "SUCCEEDED", since=struck,
    )  # fmt: skip
    assert app["finalStatus"] != "SUCCEEDED", app
    assert ended < 60, f"the orphan ran {ended:.0f}s after its task died"
    assert published == 200 and problem is None, problem
    assert left == []


def test_on_kill_kills_the_yarn_application_and_its_abort_removes_the_staging(
    stack, spark, database, yarn, on_yarn, tmp_path
):
    """The task is stopped while its driver writes in a YARN container (SIGTERM, as a worker stopping
    does): ``on_kill`` kills the application through the ResourceManager, and the abort it starts
    (its own YARN application, detached from the dying task) drops the try's staging. (A task's
    ``execution_timeout`` reaches ``on_kill`` the same way: the fault matrix's timeout cells.)"""
    dag_id, target = "yarn_kill_sigterm", f"{database}.yarn_kill_sigterm"
    trial, app_id, reader = _writing(spark, yarn, on_yarn, tmp_path, dag_id, target, 600)
    struck = time.monotonic()
    time.sleep(3)  # the write is running in the application's executor
    trial.signal_group(signal.SIGTERM)
    assert trial.wait() in ("failed", "up_for_retry")
    app = wait_until("the application ends", lambda: ended_application(yarn, app_id), timeout=60)
    assert "on_kill: killing the Spark application" in (tmp_path / "try1.log").read_text(errors="replace")
    assert app["state"] == "KILLED", app
    abort_name = f"airflow-ctas abort spark_catalog.{target} try 1"
    (abort,) = wait_until("the abort's application ends", lambda: [
        a for a in yarn.apps() if a["name"] == abort_name and a["state"] in ENDED
    ], timeout=300)  # fmt: skip
    left = leftovers(spark, database)
    problem = _cell(
        "yarn-cluster-on-kill-sigterm", 125, "SIGTERM the task's process group mid-write", "mid-write", "create",
        try1=f"on_kill ran; the application ended {app['state']}; its abort ran in its own application "
        f"({abort['finalStatus']})", left1=left, try2="none", left2=left, values=reader.stop(), allowed={"missing"},
        rows=None, ok=abort["finalStatus"] == "SUCCEEDED" and not table_exists(spark, target), since=struck,
    )  # fmt: skip
    assert abort["finalStatus"] == "SUCCEEDED", abort
    assert not table_exists(spark, target)
    assert left == [] and problem is None, problem


@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_iceberg_and_delta_tables_publish_the_same_way_in_cluster_mode(
    table_format, stack, database, yarn, on_yarn, monkeypatch, tmp_path, request
):
    """A table of each format from a driver in a YARN container (Spark 4.1's, the format's jars
    shipped by YARN): a staged create's rename, then a same-shape replace and an
    ``overwrite_partitions`` (Iceberg, on the Iceberg REST catalog: a branch swap in one REST
    commit; Delta: one Delta commit), each decided by the task over the channel. The replace is
    ``durable=True`` and its try 1's task is SIGKILLed while the driver waits for the decision: the
    driver keeps its checked staging, and try 2 takes it over and publishes it without the query. Iceberg on the Hive
    catalog from a YARN container: the publish is the same code, its catalog the metastore every
    other test of this module reaches from the cluster."""
    reader: TableReader
    if table_format == "iceberg":
        rest, reader = request.getfixturevalue("rest"), request.getfixturevalue("rest_reader")
        namespace = f"{REST_CATALOG}.{database}"
        reader.rows(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        catalog_conf = {"spark.jars": iceberg_jar(), **rest.conf(REST_CATALOG)}
        target = app_target = f"{namespace}.on_yarn"
        mechanisms = ("rename", "branch")
        left: Callable[[], list[str]] = lambda: iceberg_leftovers(reader, namespace, target)  # noqa: E731
    else:
        catalog_conf, delta_reader = delta_conf(), DeltaReader(tmp_path / "reader.log")
        reader, target, app_target = delta_reader, f"{database}.on_yarn", f"spark_catalog.{database}.on_yarn"
        mechanisms = ("rename", "delta_commit")
        left = lambda: delta_reader.staging_tables(database)  # noqa: E731
    venv = pyspark_venv(SPARK_FOR_FORMATS)
    release = SparkInstall.of_venv(venv)
    conf = {**on_yarn, **task_conf_on_spark41(monkeypatch, catalog_conf),
            **yarn.spark_conf(str(venv / "bin" / "python"), release.jars_dir, container_archive(release))}  # fmt: skip
    checks = [{"type": "row_count", "min": 100}, {"type": "not_null", "columns": ["k"]}]
    steps = [  # mode, query, rows then, mechanism, checks: partition k=1 of 120 rows (40) is replaced by 50 rows
        ("create", "SELECT id, id % 3 AS k FROM range(300)", 300, mechanisms[0], []),
        ("replace", "SELECT id, id % 3 AS k FROM range(120)", 120, mechanisms[1], checks),
        ("overwrite_partitions", "SELECT id, 1 AS k FROM range(1000, 1050)", 130, mechanisms[1], []),
    ]
    try:
        for mode, sql, rows, mechanism, audit in steps:
            # The replace is durable: its task is lost while the driver waits, and try 2 publishes.
            durable = mode == "replace"
            publish = partial(_adopted_after_a_lost_task, yarn, tmp_path) if durable else partial(_publish, yarn)
            txn = publish(f"yarn_{table_format}_{mode}", app_target, mechanism, conf=conf, table_format=table_format,
                          target_table=target, mode=mode, sql=sql, partition_by=["k"], checks=audit)  # fmt: skip
            assert txn["details"]["spark_application"]["version"] == SPARK_FOR_FORMATS
            passed = {c["name"]: (c["passed"], c["value"]) for c in txn["details"].get("checks", [])}
            assert passed == ({"row_count": (True, 120), "not_null(k)": (True, 0)} if audit else {}), mode
            assert reader.value(f"SELECT count(*) FROM {target}") == rows
            assert left() == []
        assert reader.value(f"SELECT count(*) FROM {target} WHERE k = 1 AND id >= 1000") == 50
        assert reader.value(f"SELECT count(*) FROM {target} WHERE k <> 1") == 80, "an unstaged partition changed"
    finally:
        if table_format == "delta":  # the REST catalog's reader is the session's
            reader.close()


GROUP_DAG = """\
import json
import pendulum
from airflow.sdk import DAG
from airflow_provider_ctas.operators import AtomicCtasOperator, PublishGroupOperator

CONF = json.loads({conf!r})
with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False) as dag:
    members = [
        AtomicCtasOperator(task_id=name, sql=f"SELECT id, 2 AS v FROM range({{rows}})", target_table=table,
                           mode="replace", table_format="iceberg", conn_id="spark_yarn", conf=CONF,
                           publish_group="publish")
        for name, table, rows in {members!r}
    ]
    members >> PublishGroupOperator(task_id="publish")
"""


def test_a_publish_group_of_cluster_mode_drivers_publishes_its_members_in_one_commit(
    stack, database, yarn, on_yarn, monkeypatch, request
):
    """Two members stage and hold their Iceberg tables on a REST catalog from drivers in YARN
    containers, each deciding over its channel; the publisher's own driver in YARN publishes both in
    one multi-table commit."""
    rest, reader = request.getfixturevalue("rest"), request.getfixturevalue("rest_reader")
    namespace = f"{REST_CATALOG}.{database}"
    reader.rows(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    members = [("facts", f"{namespace}.facts", 20), ("dims", f"{namespace}.dims", 5)]
    for _, table, _ in members:
        reader.rows(f"CREATE TABLE {table} USING iceberg AS SELECT id, 1 AS v FROM range(10)")
    venv = pyspark_venv(SPARK_FOR_FORMATS)
    release = SparkInstall.of_venv(venv)
    catalog_conf = {"spark.jars": iceberg_jar(), **rest.conf(REST_CATALOG)}
    conf = {**on_yarn, **task_conf_on_spark41(monkeypatch, catalog_conf),
            **yarn.spark_conf(str(venv / "bin" / "python"), release.jars_dir, container_archive(release))}  # fmt: skip
    path = DAGS_FOLDER / "yarn_group.py"
    path.write_text(GROUP_DAG.format(conf=json.dumps(conf), dag_id="yarn_group", members=members))
    run = load_dag(path).test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states == {"facts": "success", "dims": "success", "publish": "success"}, states
    for _, table, rows in members:
        assert reader.rows(f"SELECT count(*), max(v) FROM {table}") == [[rows, 2]], table
        app = application(yarn, table, 1)
        assert app["finalStatus"] == "SUCCEEDED", app
    groups = {reader.properties(table)[GROUP] for _, table, _ in members}
    assert len(groups) == 1, "both were published by the same group commit"
    publisher = max((a for a in yarn.apps() if a["name"] == "airflow-ctas group publish try 1"),
                    key=lambda a: int(a["startedTime"]))  # fmt: skip
    assert publisher["finalStatus"] == "SUCCEEDED", publisher
    assert (
        iceberg_leftovers(reader, namespace, members[0][1]) + iceberg_leftovers(reader, namespace, members[1][1]) == []
    )
