"""The chaos soak: DAG runs of an atomic task with faults drawn from a seed, every invariant checked.

Each run (``tests/soak/schedule.py`` draws it from its seed) makes one task instance on the realistic
stack (the metastore service, real spark-submit drivers, Airflow tries as separate processes): a
target per mode, then one try per scheduled fault (killed, terminated, its driver killed, an
exception in the driver, a failing query, the table's catalog service restarted, timed out by Airflow; with
``--storage s3``, the object store down for the drivers), then a
try without one; or a try held while its task instance is cleared, its next try running beside it.
A reader polls the target all along. Checked:

- the reader only ever saw what README promises for the mode (the old version or the new one, or no
  table before a create; a swap's window);
- a try that failed left no new version published, unless the fault landed after the task had
  decided commit (README's after-commit window), which is counted on its own;
- a failed try that reported its failure carries one of the provider's error codes;
- a cleared try never succeeds once its next try began;
- the last try succeeds, the table holds exactly the new version, and nothing of the provider's is
  left in the database.

A run that breaks one prints its seed and schedule; ``bash scripts/soak.sh --replay SEED`` runs
it again. The default test run includes a small sample (``CTAS_SOAK_RUNS``, seed
``CTAS_SOAK_SEED``); ``bash scripts/soak.sh --runs N`` is the soak. Results:
build/reports/soak.md.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.core import errors
from airflow_provider_ctas.core.transaction import TransactionKey
from ctas_devstack.fault_proxy import FaultProxy
from ctas_devstack.s3 import S3Server
from ctas_devstack.yarn import YarnCluster
from tests.soak.readings import NEW_ROWS, OLD_ROWS, Verdict, judge
from tests.soak.schedule import (
    AFTER_COMMIT_POINTS,
    MID_WRITE,
    S3_KINDS,
    TABLE_FORMATS,
    Fault,
    Schedule,
    formats_from,
    run_seeds,
    schedule_for,
)
from tests.soak.tables import S3SoakTable, SoakTable, soak_table
from tests.support.catalog import database_dir
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.delta import DeltaReader, delta_conf
from tests.support.faults import Trial, summarize, wait_for_drivers_to_exit
from tests.support.fixtures import METASTORE_DATABASE, REST_CATALOG, STOP_GRACE
from tests.support.iceberg import IcebergReader, iceberg_conf, task_conf_on_spark41
from tests.support.objectstore import FLAKY_RETRIES, keys
from tests.support.phases import executor_for, run_all
from tests.support.processes import kill_spark_driver
from tests.support.soak_report import record_run
from tests.support.table_reader import TableReader
from tests.support.waiting import wait_until
from tests.support.yarn import CONN_ID as YARN_CONN_ID
from tests.support.yarn import application, driver_pid, use_yarn, wait_for_applications_to_end, yarn_cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.soak]

SEED_SQL = "SELECT id, 'v1' AS version, CAST(NULL AS STRING) AS pause, CAST(id % 4 AS STRING) AS p FROM range({rows})"
# Slow (milliseconds per row) in every try when a fault lands mid-write: one query text for every try.
NEW_SQL = (
    "SELECT id, 'v2' AS version, reflect('java.lang.Thread', 'sleep', CAST({slow_ms} AS BIGINT)) AS pause, "
    "CAST(id % 4 AS STRING) AS p FROM range(0, 400, 1, 4){failing}"
)
CODES = {cls.code for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, errors.CtasError)}
PUBLISH_POINTS = frozenset(
    {"before_publish", "publish_checked", "publish_after_move_aside", "publish_between_partitions"}
)
CI_SAMPLE_SEED = 20261147
"""The default run's two runs: a durable swap whose query fails, then an ``overwrite_partitions``
whose task is killed after begin and whose next try is cleared while held at ``before_publish``
(the fencing path), about 35 s in all. The earlier sample (20261128) held two tries past their
30 s ``execution_timeout``: 163 worker-seconds, idle, of a CI run near its budget; timeouts stay
covered by the fault matrix and the YARN cells."""
DURABLE_WAIT = "waiting for it to end before this try begins"
"""What a durable try logs while an earlier try's driver still runs in YARN (``runners/yarn_driver.py``)."""
PAUSE_SECONDS = 15
"""How long a driver or task waits at the point where a kill lands (the kill comes within a second)."""
CLUSTER = os.environ.get("CTAS_SOAK_CLUSTER", "local")
"""Where the drivers run (``scripts/soak.sh --cluster``): beside their task (local), or in YARN
containers in cluster deploy mode (yarn), in a network that cannot reach the task's host."""
STORAGE = os.environ.get("CTAS_SOAK_STORAGE", "local")
"""Where the tables live (``scripts/soak.sh --storage``): the local disk, or the S3 server's bucket
``SOAK_BUCKET``, which the drivers reach through a fault proxy (the ``S3_KINDS`` faults) and the
metastore service and the readers reach directly."""
SOAK_BUCKET = "soak"
TIMEOUT_SECONDS = (
    {"parquet": 30, "iceberg": 75, "iceberg-rest": 75, "delta": 75}
    if CLUSTER == "local" and STORAGE == "local"
    else {"parquet": 60 if CLUSTER == "local" else 120}
)
"""The task's ``execution_timeout`` in a run with a timeout fault (a try without one takes 10-20 s
here for a file-format table (20-35 s on S3), 25-45 s for Iceberg and Delta on their Spark 4.1
drivers, 40-70 s for a file-format table whose driver runs in YARN)."""
S3_DOWN_SECONDS = (1, 20)
"""How long the store stays down or unreachable for the drivers (drawn); their S3A retries are cut
(``FLAKY_RETRIES``), so an outage fails the calls it meets."""
FORMATS = formats_from(os.environ.get("CTAS_SOAK_FORMATS", "parquet"))
"""The table formats the soak's runs draw from (``scripts/soak.sh --formats``)."""
REPLAY = "bash scripts/soak.sh" + ("" if FORMATS == ("parquet",) else " --formats " + ",".join(FORMATS))
if CLUSTER != "local":
    REPLAY += f" --cluster {CLUSTER}"
if STORAGE != "local":
    REPLAY += f" --storage {STORAGE}"
METASTORE = os.environ.get(METASTORE_DATABASE, "derby")
"""Where the metastore service keeps its state: ``scripts/soak.sh`` runs PostgreSQL unless told
``--metastore derby``; the default test run's sample keeps the session's Derby."""
if METASTORE != "postgres":
    REPLAY += f" --metastore {METASTORE}"
REPLAY += " --replay"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "run_seed" in metafunc.fixturenames:
        replay = os.environ.get("CTAS_SOAK_REPLAY")
        seeds = [int(seed) for seed in replay.split(",")] if replay else run_seeds(
            int(os.environ.get("CTAS_SOAK_SEED", str(CI_SAMPLE_SEED))), int(os.environ.get("CTAS_SOAK_RUNS", "2"))
        )  # fmt: skip
        metafunc.parametrize("run_seed", seeds, ids=[str(seed) for seed in seeds])


def after_commit(fault: Fault) -> bool:
    """The fault lands after the task decided commit, so the try may have published although it failed."""
    if fault.kind == "raise":
        return fault.point in AFTER_COMMIT_POINTS
    return fault.point in AFTER_COMMIT_POINTS | PUBLISH_POINTS


def _sql(schedule: Schedule) -> str:
    failing = [i for i, f in enumerate(schedule.faults, 1) if f.kind == "query-fails"]
    condition = (
        f" WHERE {{{{ \"raise_error('soak: the query fails') IS NULL\" if ti.try_number in {failing} else 'true' }}}}"
        if failing
        else ""
    )
    return NEW_SQL.format(slow_ms=25 if schedule.slow else 0, failing=condition)


def _seed_target(schedule: Schedule, spark: Any, table: SoakTable) -> None:
    if schedule.mode in ("replace", "overwrite_partitions"):
        table.create(SEED_SQL.format(rows=OLD_ROWS), partitioned=schedule.mode == "overwrite_partitions")
    elif schedule.mode == "swap":  # by this provider, so that the swap may drop the version it replaces
        select = f"SELECT id, p FROM ({SEED_SQL.format(rows=OLD_ROWS)})"
        run_all(executor_for(spark, table.name, select, mode="create"))
    # The new version of a swap's target has more columns than this one: the replace swaps.


@pytest.fixture(scope="module")
def format_readers(metastore, tmp_path_factory) -> Iterator[Callable[[str], TableReader | None]]:
    """A module's Iceberg and Delta readers, each started when a run first needs it."""
    readers: dict[str, TableReader] = {}

    def reader(table_format: str) -> TableReader | None:
        if table_format != "parquet" and table_format not in readers:
            log = tmp_path_factory.mktemp(table_format) / "reader.log"
            readers[table_format] = IcebergReader(metastore, log) if table_format == "iceberg" else DeltaReader(log)
        return readers.get(table_format)

    yield reader
    for session in readers.values():
        session.close()


@pytest.fixture(scope="module")
def store_proxy(s3: S3Server) -> Iterator[FaultProxy | None]:
    """With ``--storage s3``, the proxy between the drivers and the S3 server; else None."""
    if STORAGE != "s3":
        yield None
        return
    with contextlib.suppress(Exception):  # made by an earlier module of the session
        s3.client().create_bucket(Bucket=SOAK_BUCKET)
    proxy = FaultProxy(("127.0.0.1", s3.port)).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def soak_database(request: pytest.FixtureRequest, spark: Any, store_proxy: FaultProxy | None) -> Iterator[str]:
    """The run's database: the test's own, or with ``--storage s3`` one in the soak's bucket."""
    if store_proxy is None:
        yield request.getfixturevalue("database")
        return
    name = f"soak_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION 's3a://{SOAK_BUCKET}/{name}.db'")
    try:
        yield name
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture(scope="module")
def yarn(metastore, tmp_path_factory) -> Iterator[YarnCluster | None]:
    """With ``--cluster yarn``, the YARN the drivers run in (it reaches the metastore service and
    nothing else of this host); else None."""
    if CLUSTER != "yarn":
        yield None
        return
    with yarn_cluster(tmp_path_factory.mktemp("yarn"), allow=(metastore.port,)) as cluster:
        yield cluster


def _task_conf(table_format: str, metastore: Any, request: pytest.FixtureRequest) -> dict[str, str]:
    """What the task's conf says for its table's format (Iceberg and Delta: drivers on Spark 4.1)."""
    if table_format == "parquet":
        return {}
    if table_format == "iceberg-rest":
        return dict(request.getfixturevalue("on_rest"))
    catalog = iceberg_conf(metastore) if table_format == "iceberg" else delta_conf()
    return task_conf_on_spark41(request.getfixturevalue("monkeypatch"), catalog)


def _kill_driver(yarn: YarnCluster | None, target: str, try_number: int) -> None:
    """SIGKILL the try's driver: its spark-submit JVM, or in YARN its application master's container."""
    if yarn is None:
        kill_spark_driver(f"{target} try {try_number}")
        return
    app_id = application(yarn, f"spark_catalog.{target}", try_number)["id"]
    os.kill(wait_until("the driver's JVM is found", lambda: driver_pid(app_id), timeout=30), signal.SIGKILL)


def _wait_for_drivers(yarn: YarnCluster | None, target: str) -> None:
    """Until no driver of the run's tries runs: one that lost its task may finish first, for as long
    as a fault holds it (a timed-out try's, held twice its timeout after the task decided commit)."""
    wait_for_drivers_to_exit(target)
    if yarn is not None:
        wait_for_applications_to_end(yarn, f"spark_catalog.{target}", timeout=2 * TIMEOUT_SECONDS["parquet"] + 120)


def _fault_spec(fault: Fault, try_number: int, release: Path, table_format: str) -> dict[str, Any]:
    if fault.point == MID_WRITE and table_format != "parquet":  # the write starts right after this point
        return {"before_write": {"only_try": try_number}}
    if fault.kind == "raise":
        return {fault.point: {"raise": "soak", "only_try": try_number}}
    if fault.kind == "timeout":
        return {fault.point: {"sleep": 2 * TIMEOUT_SECONDS[table_format], "only_try": try_number}}
    if fault.kind == "clear":  # where the held try publishes, if it does, is recorded: see ``_clear``
        return {
            fault.point: {"wait_for": str(release), "only_try": try_number},
            "after_publish": {"sleep": 0, "only_try": try_number},
        }
    if fault.kind == "metastore-restart":
        return {fault.point: {"sleep": 4, "only_try": try_number}}
    if fault.point and fault.point != MID_WRITE:
        return {fault.point: {"sleep": PAUSE_SECONDS, "only_try": try_number}}
    return {}


def _reached(progress: Path, point: str, try_number: int) -> bool:
    return progress.exists() and f"{point} try={try_number}" in progress.read_text().splitlines()


def _act(fault: Fault, trial: Trial, progress: Path, writing: Callable[[], bool] | None, target: str,
         services: tuple[Any, YarnCluster | None, FaultProxy | None], try_number: int,
         rng: random.Random) -> bool:  # fmt: skip
    """Make ``fault`` happen to the running try; False when the try ended before it could land (a
    try with nothing to write, after an earlier try published). A timeout lands by itself (Airflow
    raises it in the held task); a clear is held here and resumed by ``_clear``. Mid-write: once the
    staging directory has write debris (``writing``: a file-format table), or once the driver reached
    the point right before an Iceberg or Delta write (whose files go straight to the table's data)."""
    catalog, yarn, store = services
    if fault.kind in ("raise", "query-fails"):
        return True
    if fault.point == MID_WRITE:
        where = "the try's write to start"
        started = writing if writing is not None else (lambda: _reached(progress, "before_write", try_number))
        landed = wait_until(where, lambda: started() or (not trial.running() and "ended"), 240, 0.05)
        time.sleep(rng.uniform(0.2, 2.0) if writing is not None else rng.uniform(0.5, 3.0))
    else:
        where = f"the try to reach {fault.point}"
        landed = wait_until(
            where, lambda: _reached(progress, fault.point, try_number) or (not trial.running() and "ended"), 240
        )
    if landed == "ended":
        return False
    if fault.kind in ("timeout", "clear"):
        return True
    if fault.kind == "kill-task":
        trial.signal_group(signal.SIGKILL)
    elif fault.kind == "term-task":
        trial.signal_group(signal.SIGTERM)
    elif fault.kind == "kill-driver":
        _kill_driver(yarn, target, try_number)
    elif fault.kind == "metastore-restart":
        catalog.stop(STOP_GRACE)
        try:
            time.sleep(rng.uniform(1, 6))
        finally:
            catalog.start()
    elif fault.kind in S3_KINDS:
        assert store is not None, f"{fault.kind} is drawn for tables on S3 only"
        outage = store.unavailable if fault.kind == "s3-down" else store.down
        outage()
        try:
            time.sleep(rng.uniform(*S3_DOWN_SECONDS))
        finally:
            outage(False)
    return True


def _through(proxy: FaultProxy) -> dict[str, str]:
    """The task's conf for drivers that reach the soak's bucket through ``proxy``, with S3A's retries
    cut, so that an outage of the drawn length fails calls instead of being waited out."""
    settings = {"endpoint": proxy.url, **FLAKY_RETRIES}
    return {f"spark.hadoop.fs.s3a.bucket.{SOAK_BUCKET}.{key}": value for key, value in settings.items()}


def _debris(names: list[str]) -> bool:
    return any(part.startswith(("_temporary", ".spark-staging")) for name in names for part in name.split("/"))


def _staging_writing(spark: Any, s3: S3Server, database: str, staging: str) -> Callable[[], bool]:
    """Whether a try's staging directory has write debris yet, on the local disk or in the bucket."""
    if STORAGE == "s3":
        return lambda: _debris(keys(s3, SOAK_BUCKET, f"{database}.db/{staging}/"))
    directory = database_dir(spark, database) / staging
    return lambda: _debris([p.name for p in directory.iterdir()] if directory.is_dir() else [])


def test_soak_run(run_seed, stack, spark, soak_database, tmp_path, metastore, yarn, format_readers, s3,
                  store_proxy, monkeypatch, request):  # fmt: skip
    schedule = schedule_for(run_seed, FORMATS, STORAGE)
    rng = random.Random(run_seed)
    print(f"soak run {schedule}; replay: {REPLAY} {run_seed}")
    database, name = soak_database, f"soak_{run_seed}"
    catalog_service = metastore  # what a metastore-restart fault restarts: the table's catalog
    if store_proxy is not None:
        table: SoakTable = S3SoakTable(spark, database, name, s3, SOAK_BUCKET)
    elif schedule.table_format == "iceberg-rest":
        catalog_service = request.getfixturevalue("rest")
        table = soak_table(spark, database, name, request.getfixturevalue("rest_reader"), REST_CATALOG)
    else:
        table = soak_table(spark, database, name, format_readers(schedule.table_format))
    target = table.name
    dag_id, run_id = f"soak_{run_seed}", f"soak__{run_seed}"
    _seed_target(schedule, spark, table)
    make_dag(
        dag_id,
        retries=len(schedule.faults) + 1,
        target_table=target,
        mode="replace" if schedule.mode == "swap" else schedule.mode,
        allow_swap=schedule.mode == "swap",
        partition_by=["p"] if schedule.mode == "overwrite_partitions" else [],
        sql=_sql(schedule),
        durable=schedule.durable,
        conf={
            **_task_conf(schedule.table_format, metastore, request),
            **(use_yarn(yarn, monkeypatch) if yarn else {}),
            **(_through(store_proxy) if store_proxy else {}),
        },
        table_format=TABLE_FORMATS[schedule.table_format],
        **({"conn_id": YARN_CONN_ID} if yarn else {}),
        operator_extra=(
            f", execution_timeout=datetime.timedelta(seconds={TIMEOUT_SECONDS[schedule.table_format]})"
            if any(f.kind == "timeout" for f in schedule.faults)
            else ""
        ),
    )
    dag_file, progress = DAGS_FOLDER / f"{dag_id}.py", tmp_path / "progress"
    txn_tag = TransactionKey(dag_id, "ctas", run_id).txn_id[:16]
    reader = table.watch()
    started, problems, tries, after_commit_publishes, succeeded = time.monotonic(), list[str](), list[str](), 0, False
    for try_number, fault in enumerate(schedule.faults, 1):
        writing = (
            _staging_writing(spark, s3, database, f"__ctas_{txn_tag}_s{try_number}")
            if table.table_format == "parquet"
            else None
        )
        before = table.rows()
        release = tmp_path / f"release{try_number}"
        faults = {"progress_file": str(progress), **_fault_spec(fault, try_number, release, table.table_format)}
        trial = Trial(dag_file, dag_id, run_id, tmp_path / f"try{try_number}.log", faults).start()
        landed = _act(fault, trial, progress, writing, target, (catalog_service, yarn, store_proxy), try_number, rng)
        if fault.kind == "clear":
            beside, problem = _clear(
                trial, fault.point, landed, release, progress, try_number, rng, (dag_file, dag_id, run_id), tmp_path
            )
            _wait_for_drivers(yarn, target)
            tries += beside
            problems += problem
            succeeded = beside[-1].endswith(": success")  # else one more try without a fault
            break
        state = trial.wait()
        _wait_for_drivers(yarn, target)
        tries.append(f"{fault}: {state}" if landed else f"{fault} (did not land: the try ended first): {state}")
        if state == "success":  # the try survived its fault (a metastore back in time): the run is done
            succeeded = True
            break
        published = table.rows() == NEW_ROWS and before != NEW_ROWS  # not an earlier try's
        after_commit_publishes += published and after_commit(fault)
        problems += _failed_try_problems(xcom_value(dag_id, run_id, "ctas_transaction"), try_number, fault, published)
    if not succeeded:
        state = Trial(dag_file, dag_id, run_id, tmp_path / "last.log").start().wait()
        tries.append(f"no fault: {state}")
        succeeded = state == "success"
    values = reader.stop()
    final, verdict = _final_problems(table, succeeded, values, schedule, tmp_path)
    problems += final
    record_run(
        {
            "seed": run_seed,
            "schedule": str(schedule),
            "format": schedule.table_format,
            "cluster": CLUSTER,
            "storage": STORAGE,
            "metastore": METASTORE,
            "mode": schedule.mode,
            "durable": schedule.durable,
            "faults": [str(f) for f in schedule.faults],
            "tries": tries,
            "after_commit": after_commit_publishes,
            "fence_window": verdict.fence_window,
            "derby_listing": verdict.derby_listing,
            "seen": summarize(values),
            "problems": problems,
            "seconds": round(time.monotonic() - started),
        }
    )
    assert not problems, f"soak run {schedule}: {'; '.join(problems)}; replay: {REPLAY} {run_seed}"


def _clear(trial: Trial, point: str, landed: bool, release: Path, progress: Path, try_number: int, rng: random.Random,
           dag: tuple[Path, str, str], logs: Path) -> tuple[list[str], list[str]]:  # fmt: skip
    """The held try's task instance is cleared: its next try starts beside it and begins (raising its
    fence), then the held one resumes, somewhere in the next try's run. The held try is a zombie: it
    must not publish once the next try began, whatever the next try does. A durable next try whose
    earlier driver still runs in YARN does not begin until that driver's application ended (it takes
    over what the driver wrote): the held try resumes once the next try waits, and may publish before
    the next try begins."""
    following = try_number + 1
    spec = {"progress_file": str(progress), "after_begin": {"sleep": 0, "only_try": following}}
    log = logs / f"try{following}.log"
    nxt = Trial(*dag, log, spec).start()

    def waits() -> bool:
        return log.exists() and DURABLE_WAIT in log.read_text(errors="replace")

    try:
        if landed:
            wait_until(f"try {following} to begin", lambda: _reached(progress, "after_begin", following)
                       or waits() or (not nxt.running() and "ended"), 240)  # fmt: skip
            time.sleep(rng.uniform(0, 3))
    finally:
        release.touch()
    held, beside = trial.wait(), nxt.wait()
    tries = [f"clear@{point}{'' if landed else ' (ended first)'}: {held}", f"no fault, beside it: {beside}"]
    lines = progress.read_text().splitlines() if progress.exists() else []
    began, published = f"after_begin try={following}", f"after_publish try={try_number}"
    # A held try that ended before the next one started (its fault did not land: it found the
    # table already published) cannot have published after it began.
    superseded = landed and held == "success" and began in lines and (
        published not in lines or lines.index(began) < lines.index(published))  # fmt: skip
    return tries, [f"try {try_number} published after try {following} began"] if superseded else []


def _failed_try_problems(txn: dict[str, Any] | None, try_number: int, fault: Fault, published: bool) -> list[str]:
    problems = []
    code = (((txn or {}).get("details") or {}).get("error") or {}).get("code")
    if code is not None and code not in CODES:
        problems.append(f"try {try_number} failed with {code!r}, not one of the provider's error codes")
    if published and not after_commit(fault):
        problems.append(f"try {try_number} failed ({fault}) but its version was published")
    return problems


def _final_problems(table: SoakTable, succeeded: bool, values: list[Any], schedule: Schedule,
                    logs: Path) -> tuple[list[str], Verdict]:  # fmt: skip
    """The run's problems, and the verdict on what its reader saw (``readings.judge``)."""
    problems = []
    rows, left = table.rows(), table.leftovers()
    if not succeeded:
        problems.append(f"the last try did not succeed (logs in {logs})")
    if rows != NEW_ROWS:
        problems.append(f"the table holds {rows}, not the {NEW_ROWS} rows of the new version")
    if left:
        problems.append(f"left behind: {left}")
    verdict = judge(values, schedule, METASTORE)
    return problems + ([verdict.problem] if verdict.problem else []), verdict
