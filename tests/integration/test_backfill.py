"""Backfills with Airflow's real scheduler: LocalExecutor on PostgreSQL, local-mode drivers and the
shared metastore service, several runs in parallel; a try whose supervisor (the executor's worker
process that runs the task process and heartbeats for it) is SIGKILLed; and ``on_kill`` on a Spark
standalone cluster (client mode), which is what kills an application that runs elsewhere than its task.

Pass 1 backfills the logical dates, each overwriting its date's partition of a partitioned table
(the first runs race to create it). Pass 2 reprocesses the completed runs with new data, with one
date made to fail. A reader samples every partition's row
count the whole time; every observation must be a complete version of that partition.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
import pytest

from ctas_devstack.airflow_services import AirflowServices
from ctas_devstack.cluster import StandaloneCluster
from ctas_devstack.postgres import create_database, drop_database
from tests.support.catalog import count, fresh, leftovers, partition_locations
from tests.support.faults import Reader, check_observations, classify_read_error, summarize
from tests.support.fixtures import STOP_GRACE
from tests.support.processes import find_processes, wait_for_line
from tests.support.reliability import record_cell
from tests.support.waiting import wait_until

# Two dates: the two runs of each pass race, as a backfill's first runs always do (issue 22's failure
# was a first-publish race), and the loser switches its partition into the table the winner created;
# in the reprocess one date succeeds and the other fails. More dates only repeat that and cost CI time
# (each is a task process, a driver and an executor JVM, and a downstream run). Templated per-date
# targets (the example DAG's ``daily_orders_{{ ds_nodash }}``) are run by test_examples.py and
# test_assets.py.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.scheduler,
    pytest.mark.xdist_group("scheduler"),  # one scheduler for the backfill and the supervisor tests
]

DAYS = 2
FAIL_DAY = 2
DAG_SOURCE = """\
import datetime
import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, IdentityMapper, PartitionedAssetTimetable, ProductMapper, StartOfDayMapper
from airflow_provider_ctas.operators import AtomicCtasOperator

PASS = "{{{{ var.value.get('ctas_pass', '1') }}}}"
SQL = (
    "SELECT id, " + PASS + " AS pass, '{{{{ ds }}}}' AS ds, 'eu' AS region"
    " FROM range(" + PASS + " * 100 + {{{{ logical_date.day }}}})"
    "{{% if ds == var.value.get('ctas_fail_date', '') %}} WHERE raise_error('injected failure') IS NULL{{% endif %}}"
)
SPARK = {{"conn_id": "spark_local", "conf": {{"spark.task.maxFailures": "1"}}}}
ARGS = dict(
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2024, 1, {days}, tz="UTC"),
    catchup=False,
    default_args={{"retries": 1, "retry_delay": datetime.timedelta(seconds=2)}},
)

with DAG("backfill_partitions", max_active_runs=4, is_paused_upon_creation=False, **ARGS) as partitions:
    AtomicCtasOperator(
        task_id="ctas", target_table="{db}.events", mode="overwrite_partitions", partition_by=["ds", "region"], sql=SQL,
        **SPARK,
    )

# Runs once per partition the backfills published: the events' composite keys (``ds|region``), split
# by Airflow's own ProductMapper, each part mapped by its own mapper.
DAILY = StartOfDayMapper(input_format="%Y-%m-%d", output_format="%Y%m%d")
with DAG(
    "events_downstream",
    schedule=PartitionedAssetTimetable(
        assets=partitions.get_task("ctas").outlets[0], default_partition_mapper=ProductMapper(DAILY, IdentityMapper())
    ),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    is_paused_upon_creation=False,
):
    EmptyOperator(task_id="report")
"""

SUPERVISED_DB = f"supervised_{uuid.uuid4().hex[:10]}"
SUPERVISED = f"{SUPERVISED_DB}.dim"
HEARTBEAT_TIMEOUT = 40
"""The scheduler's ``task_instance_heartbeat_timeout`` here (300 s by default): how long a try whose
supervisor is gone stays running before the scheduler fails it. Live supervisors heartbeat every
few seconds, well within it even on a loaded machine."""
SUPERVISED_SOURCE = """\
import datetime
import pendulum
from airflow.sdk import DAG
from airflow_provider_ctas.operators import AtomicCtasOperator

with DAG("supervisor_killed", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         is_paused_upon_creation=False, default_args={{"retries": 1, "retry_delay": datetime.timedelta(seconds=1)}}):
    AtomicCtasOperator(task_id="ctas", target_table="{target}", mode="replace", conn_id="spark_local",
                       sql="SELECT id, CAST({{{{ ti.try_number }}}} AS BIGINT) AS written_by_try FROM range(400)",
                       conf={{"spark.task.maxFailures": "1"}})
"""


def expected(pass_number: int, day: int) -> int:
    return pass_number * 100 + day


@pytest.fixture(scope="module")
def scheduler(metastore, spark, tmp_path_factory) -> Iterator[tuple[AirflowServices, Path]]:
    """Airflow's scheduler, DAG processor and API server on PostgreSQL; the backfill's drivers run in
    local mode (an executor JVM per application on a cluster would add CPU, not coverage: on_kill on
    the cluster is its own test)."""
    root = tmp_path_factory.mktemp("scheduler")
    # The supervisor test holds try 1 after its prepare and try 2 after its begin, each until the test
    # releases it, and sees where try 1's driver got to (the scheduler's tasks inherit this
    # environment; only that test's target matches).
    target = f"spark_catalog.{SUPERVISED}"
    faults = {
        "progress_file": str(root / "progress"),
        "after_prepare": {"wait_for": str(root / "release1"), "only_try": 1, "only_target": target},
        "after_begin": {"wait_for": str(root / "release2"), "only_try": 2, "only_target": target},
        "before_publish": {"sleep": 0, "only_try": 1, "only_target": target},
    }
    with ExitStack() as started:  # whatever started is stopped, even if a later step fails
        database = f"ctas_test_{uuid.uuid4().hex[:10]}"
        database_url = create_database(database)
        started.callback(drop_database, database)
        dags = root / "dags"
        dags.mkdir()
        services = AirflowServices(
            root / "airflow",
            database_url,
            dags,
            {
                "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[1]"}),
                "AIRFLOW__CORE__PARALLELISM": "8",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
                "AIRFLOW_CTAS_FAULTS": json.dumps(faults),
            },
        )
        started.callback(services.stop, STOP_GRACE)
        services.start()
        yield services, dags


@pytest.fixture(scope="module")
def cluster(metastore, tmp_path_factory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("cluster"), cores=2, memory="2g").start()
    yield cluster
    cluster.stop(STOP_GRACE)


def query(services: AirflowServices, sql: str, *params: str) -> list[tuple[Any, ...]]:
    import psycopg2

    url = services.sql_alchemy_conn.replace("postgresql+psycopg2://", "postgresql://")
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def dag_runs(services: AirflowServices, dag_id: str) -> dict[str, str]:
    return dict(query(services, "SELECT run_id, state FROM dag_run WHERE dag_id = %s", dag_id))


def wait_for_runs(
    services: AirflowServices, dag_id: str, expect: int, timeout: float, closed: bool = True
) -> dict[str, str]:
    """Waits for the runs and, with ``closed``, for the scheduler to close their backfill.

    The scheduler marks a backfill complete on a 30 s timer after its last run ends; until then
    ``airflow backfill create`` for the same DAG is refused with AlreadyRunningBackfill.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = dag_runs(services, dag_id)
        finished = {r: s for r, s in runs.items() if s in ("success", "failed")}
        open_backfills = closed and query(
            services, "SELECT id FROM backfill WHERE dag_id = %s AND completed_at IS NULL", dag_id
        )
        if len(runs) >= expect and len(finished) == len(runs) and not open_backfills:
            return runs
        time.sleep(3)
    raise TimeoutError(f"{dag_id}: runs did not finish in {timeout}s: {dag_runs(services, dag_id)}")


def downstream_partitions(services: AirflowServices, expect: int, timeout: float = 300) -> list[str]:
    """The partition keys of ``events_downstream``'s runs, once there are ``expect`` (and a little
    longer, so that one too many would show)."""
    deadline, settle = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        keys = sorted(
            str(key)
            for (key,) in query(services, "SELECT partition_key FROM dag_run WHERE dag_id = %s", "events_downstream")
        )
        settle = settle + 1 if len(keys) >= expect else 0
        if settle == 2:
            return keys
        time.sleep(5)
    return keys


def task_log_lines(services: AirflowServices, dag_id: str, run_id: str) -> list[str]:
    """What the provider and Airflow said about a run's task: its ``[airflow-ctas]`` lines and errors, per try."""
    folder = services.root / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=ctas"
    lines = []
    for attempt in sorted(folder.glob("attempt=*.log")):
        lines.append(f"--- {attempt.name}")
        for line in attempt.read_text(errors="replace").splitlines():
            if any(word in line for word in ("[airflow-ctas]", "Error", "error_code", "Task failed", "state")):
                lines.append(line[:400])
    return lines or [f"(no task log under {folder})"]


def explain(services: AirflowServices, spark: Any, table: str, runs: dict[str, dict[str, str]], reader: Any) -> str:
    """Everything needed to tell a failed run from an unreadable partition, for an assertion message."""
    parts = []
    for dag_id, states in runs.items():
        for run_id, state in sorted(states.items()):
            if state != "success":
                parts.append(f"== {dag_id} {run_id}: {state}\n" + "\n".join(task_log_lines(services, dag_id, run_id)))
    listed = partition_locations(spark, table) if fresh(spark).catalog.tableExists(table) else {}
    parts.append("== partitions the metastore lists:\n" + "\n".join(f"{k} -> {v}" for k, v in sorted(listed.items())))
    parts.append(f"== the reader saw: { ({k: sorted(set(v)) for k, v in sorted(reader.seen.items())}) }")
    parts.append(f"== reader errors: {reader.errors[:5]}")
    return "\n".join(parts)


class PartitionReader:
    """Samples every partition's row count from the test's Spark session while backfills run."""

    def __init__(self, spark: Any, table: str) -> None:
        self.spark, self.table = spark, table
        self.seen: dict[str, list[int]] = {}
        self.errors: list[str] = []
        self.files_gone = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rows = fresh(self.spark).sql(f"SELECT ds, count(*) AS n FROM {self.table} GROUP BY ds").collect()
                for row in rows:
                    self.seen.setdefault(row["ds"], []).append(int(row["n"]))
            except Exception as exc:
                kind = classify_read_error(exc)
                if kind == "files-gone":  # a scan that listed superseded files (README: what a reader sees)
                    self.files_gone += 1
                elif kind != "missing":
                    self.errors.append(str(exc)[:300])
            time.sleep(3)  # each sample is a Spark job; the machine has 2 cores

    def __enter__(self) -> PartitionReader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def test_backfill_then_reprocess_is_atomic_per_partition(scheduler, spark, database):
    services, dags = scheduler
    (dags / "backfill.py").write_text(DAG_SOURCE.format(db=database, days=DAYS))
    services.reserialize()  # both DAGs are created unpaused
    events = f"{database}.events"
    started = time.monotonic()

    with PartitionReader(spark, events) as reader:
        services.airflow(
            "backfill", "create", "--dag-id", "backfill_partitions", "--from-date", "2024-01-01",
            "--to-date", f"2024-01-{DAYS:02d}", "--max-active-runs", "4",
        )  # fmt: skip
        first = {"backfill_partitions": wait_for_runs(services, "backfill_partitions", DAYS, 1800)}
        pass1 = time.monotonic() - started
        assert all(state == "success" for runs in first.values() for state in runs.values()), explain(
            services, spark, events, first, reader
        )
        for day in range(1, DAYS + 1):
            got = count(spark, events, f"ds = '2024-01-{day:02d}'")
            assert got == expected(1, day), f"day {day}: {got} rows\n" + explain(services, spark, events, first, reader)
        # The first runs raced to create the table: the losers published into it without a retry.
        retried = query(
            services, "SELECT run_id FROM task_instance WHERE dag_id = %s AND try_number > 1", "backfill_partitions"
        )
        assert retried == [], "\n".join(
            line for (run_id,) in retried for line in task_log_lines(services, "backfill_partitions", run_id)
        )
        days = [f"202401{day:02d}|eu" for day in range(1, DAYS + 1)]
        assert downstream_partitions(services, DAYS) == days, "one downstream run per published partition"

        variables = dags.parent / "reprocess-variables.json"
        variables.write_text(json.dumps({"ctas_pass": "2", "ctas_fail_date": f"2024-01-{FAIL_DAY:02d}"}))
        services.airflow("variables", "import", str(variables))
        reprocess_started = time.monotonic()
        services.airflow(
            "backfill", "create", "--dag-id", "backfill_partitions", "--from-date", "2024-01-01",
            "--to-date", f"2024-01-{DAYS:02d}", "--max-active-runs", "4", "--reprocess-behavior", "completed",
        )  # fmt: skip
        second = wait_for_runs(services, "backfill_partitions", DAYS, 1800, closed=False)  # no backfill follows
        pass2 = time.monotonic() - reprocess_started

    failed = sorted(run for run, state in second.items() if state == "failed")
    assert failed == [f"backfill__2024-01-{FAIL_DAY:02d}T00:00:00+00:00"], explain(
        services, spark, events, {"backfill_partitions": second}, reader
    )
    for day in range(1, DAYS + 1):
        want, got = expected(1 if day == FAIL_DAY else 2, day), count(spark, events, f"ds = '2024-01-{day:02d}'")
        assert got == want, f"day {day}: {got} rows\n" + explain(
            services, spark, events, {"backfill_partitions": second}, reader
        )

    # The failed date's try published nothing, so nothing ran downstream for it a second time.
    again = [day for day in days if day != f"202401{FAIL_DAY:02d}|eu"]
    assert downstream_partitions(services, 2 * DAYS - 1) == sorted(days + again)
    assert reader.errors == []
    for day in range(1, DAYS + 1):
        seen = reader.seen.get(f"2024-01-{day:02d}", [])
        allowed = [expected(1, day)] if day == FAIL_DAY else [expected(1, day), expected(2, day)]
        assert set(seen) <= set(allowed), f"day {day}: a reader saw {sorted(set(seen))}, allowed {allowed}"
        if day != FAIL_DAY and expected(2, day) in seen:
            assert expected(1, day) not in seen[seen.index(expected(2, day)) :], f"day {day} went back"
    assert leftovers(spark, database) == []
    # Not an assertion: what the note reports.
    Path(os.environ["CTAS_TEST_SHARED"], "backfill.json").write_text(
        json.dumps(
            {
                "pass1_seconds": round(pass1),
                "reprocess_seconds": round(pass2),
                "observations": sum(len(v) for v in reader.seen.values()),
                "reads_failed_files_gone": reader.files_gone,
                "per_partition": {k: sorted(set(v)) for k, v in sorted(reader.seen.items())},
            }
        )
    )


def _try_of(services: AirflowServices, dag_id: str) -> tuple[int, str]:
    rows = query(services, "SELECT try_number, state FROM task_instance WHERE dag_id = %s", dag_id)
    return (int(rows[0][0]), str(rows[0][1])) if rows else (0, "none")


def test_a_try_whose_supervisor_is_killed_is_failed_by_the_scheduler_and_cannot_publish_after_its_retry_began(
    scheduler, spark
):
    """The worker process that supervises a try (runs its task process, heartbeats for it, relays its
    API calls) is SIGKILLed while the try's driver holds after its prepare: the task process and its
    driver are orphaned and keep running. The scheduler fails the try once its heartbeat times out and
    starts try 2, which begins (fencing try 1) and is held; the orphan is released then, and whatever
    it does, it must not publish; then try 2 publishes, and nothing of either try is left. (An orphan
    that resumes before try 2 begins may publish: try 2 then reports it published, as a retry after
    a lost task does.)"""
    services, dags = scheduler
    spark.sql(f"CREATE DATABASE {SUPERVISED_DB}")
    old = "SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(300)"  # try 2's shape: a flip publishes
    spark.sql(f"CREATE TABLE {SUPERVISED} USING parquet AS {old}")
    (dags / "supervised.py").write_text(SUPERVISED_SOURCE.format(target=SUPERVISED))
    services.reserialize()
    progress = services.root.parent / "progress"
    reader = Reader(spark, SUPERVISED).start()
    services.airflow("dags", "trigger", "supervisor_killed")
    wait_for_line(progress, "after_prepare try=1", timeout=300)  # try 1 holds after its prepare
    driver = find_processes("org.apache.spark.deploy.SparkSubmit", f"airflow-ctas spark_catalog.{SUPERVISED} try 1")
    assert len(driver) == 1, driver
    task = psutil.Process(driver[0]).parent()
    assert task is not None
    supervisor = task.parent()
    assert supervisor is not None and "airflow" in " ".join(supervisor.cmdline()), supervisor
    supervisor.kill()
    killed = time.monotonic()
    # Try 2 runs once the scheduler has failed try 1 (its heartbeat timed out), and holds after its begin.
    wait_for_line(progress, "after_begin try=2", timeout=HEARTBEAT_TIMEOUT + 240)
    failed_after, orphan_alive = round(time.monotonic() - killed), task.is_running()
    (progress.parent / "release1").touch()  # the orphan resumes, fenced by try 2's begin
    wait_until("the orphaned try's driver ends", lambda: not find_processes(f"spark_catalog.{SUPERVISED} try 1"),
               timeout=120)  # fmt: skip
    wait_until("the orphaned task process ends", lambda: not task.is_running(), timeout=120)
    (progress.parent / "release2").touch()
    runs = wait_for_runs(services, "supervisor_killed", 1, 600, closed=False)
    values, left = reader.stop(), leftovers(spark, SUPERVISED_DB)
    published, (try_number, state) = count(spark, SUPERVISED), _try_of(services, "supervisor_killed")
    writers = [r[0] for r in fresh(spark).sql(f"SELECT DISTINCT written_by_try FROM {SUPERVISED}").collect()]
    problem = check_observations(values, {300, 400}, 400)
    lines = progress.read_text().splitlines()
    resumed = [line.split()[0] for line in lines[lines.index("after_prepare try=1") + 1 :] if line.endswith("try=1")]
    run_id = next(iter(runs))
    log = "\n".join(task_log_lines(services, "supervisor_killed", run_id))
    record_cell(
        "supervisor-killed",
        {"order": 106, "fault": "SIGKILL the try's supervisor (the executor's worker process), its task process "
         "and driver orphaned; the scheduler's real LocalExecutor, retries=1", "when": "after prepare, held until "
         "try 2 began", "mode": "replace",
         "try1": f"failed by the scheduler, try 2 begun {failed_after}s after the kill (heartbeat timeout "
         f"{HEARTBEAT_TIMEOUT}s); its task process {'was still running' if orphan_alive else 'had ended'} then; "
         f"released, its driver reached {resumed or 'no further point'}; the table holds try {writers}'s rows",
         "left1": [], "try2": f"{state} (try {try_number})", "left2": left, "seen": summarize(values),
         "rows": published, "ok": problem is None and published == 400 and writers == [2] and not left,
         "problem": problem,
         "seconds": round(time.monotonic() - killed)},
    )  # fmt: skip
    assert list(runs.values()) == ["success"], log
    assert (try_number, state) == (2, "success"), log
    assert problem is None, f"{problem}: {summarize(values)}"
    assert (published, writers) == (400, [2]), f"try 2's version stays, not the orphan's: {writers}\n{log}"
    assert left == [], left
    spark.sql(f"DROP DATABASE {SUPERVISED_DB} CASCADE")


def test_on_kill_kills_the_application_on_the_cluster(cluster, stack, spark, database, tmp_path):
    """SIGTERM the task while its application runs on the standalone cluster (client mode)."""
    from tests.support.dags import DAGS_FOLDER, make_dag
    from tests.support.faults import Trial, wait_for_drivers_to_exit

    target = f"{database}.on_cluster"
    slow = "SELECT id, reflect('java.lang.Thread', 'sleep', CAST(100 AS BIGINT)) AS pause FROM range(0, 600, 1, 2)"
    make_dag("cluster_kill", target_table=target, sql=slow, conn_id="spark_cluster")
    progress = tmp_path / "progress"
    env = {"AIRFLOW_CONN_SPARK_CLUSTER": json.dumps({"conn_type": "spark", "host": cluster.master_url})}
    trial = Trial(
        DAGS_FOLDER / "cluster_kill.py", "cluster_kill", "kill_run", tmp_path / "try.log",
        {"progress_file": str(progress), "after_begin": {"sleep": 0}}, env,
    ).start()  # fmt: skip
    wait_for_line(progress, "after_begin try=1", timeout=240)
    name = f"airflow-ctas spark_catalog.{target} try 1"

    def active() -> list[str]:
        return [app["name"] for app in cluster.state()["activeapps"]]

    wait_until(f"{name} runs on the cluster", lambda: name in active(), timeout=120, interval=0.5, observe=active)
    time.sleep(3)  # the write is running on the cluster's executors
    trial.signal_group(__import__("signal").SIGTERM)
    assert trial.wait() in ("failed", "up_for_retry")
    wait_for_drivers_to_exit(target)

    wait_until("on_kill ends the application on the cluster", lambda: name not in active(), timeout=60, observe=active)
    finished = [app for app in cluster.state()["completedapps"] if app["name"] == name]
    assert finished, "the master did not record the application as finished"
    assert not find_processes("CoarseGrainedExecutorBackend", finished[0]["id"]), "an executor survived"
    assert "on_kill: killing the Spark application" in (tmp_path / "try.log").read_text()
    assert not fresh(spark).catalog.tableExists(target)
