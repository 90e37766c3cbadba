"""Tables on an object store (an S3-compatible server on 127.0.0.1, reached through S3A): every mode
publishes by metadata alone, no object is copied at publish, a reader sees old or new, and
failures leave nothing in the bucket (objects and incomplete multipart uploads)."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.core.transaction import TransactionKey
from ctas_devstack.fault_proxy import FaultProxy
from ctas_devstack.s3 import SECRET_KEY, S3Server
from tests.support.catalog import count, fresh, location_uri, table_exists
from tests.support.dags import DAGS_FOLDER, make_dag, run_dag, xcom_value
from tests.support.faults import Reader, Trial, check_observations, summarize, wait_for_drivers_to_exit
from tests.support.fixtures import S3_BUCKET
from tests.support.gc import entries, gc_cli
from tests.support.objectstore import (
    FLAKY_RETRIES,
    copies_since,
    key_of,
    keys,
    s3_leftovers,
    table_type,
    uploads,
)
from tests.support.phases import executor_for, held_at, run_all
from tests.support.processes import kill_spark_driver, wait_for_line
from tests.support.reliability import NEW_ROWS, OLD_ROWS, record_cell
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.objectstore]


class PublishWatch:
    """Holds the driver at ``before_publish`` to note where the request log stands, then lets it go:
    every copy after that mark was made by the publish or what follows it."""

    def __init__(self, server: S3Server, tmp_path: Path) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.server, self.progress, self.release = server, tmp_path / "progress", tmp_path / "release"
        self.mark: int | None = None
        self.faults = {"progress_file": str(self.progress), "before_publish": {"wait_for": str(self.release)}}
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        wait_for_line(self.progress, "before_publish try=1", timeout=300)
        self.mark = len(self.server.requests())
        self.release.touch()

    def __enter__(self) -> PublishWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.touch()
        self._thread.join(timeout=10)

    def copies(self) -> list[dict[str, Any]]:
        assert self.mark is not None, "the run never reached its publish"
        return copies_since(self.server, self.mark)


def run_watched(monkeypatch, s3, tmp_path, dag, reader=None):
    watch = PublishWatch(s3, tmp_path)
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps(watch.faults))
    with watch:
        run = run_dag(dag)
    values = reader.stop() if reader else []
    return run, watch, values


def test_the_request_log_sees_the_copies_a_managed_rename_makes(stack, spark, s3, s3_database):
    """What the other tests count would be there: the metastore renames a managed table on S3 by
    copying every object and deleting the original."""
    session = fresh(spark)
    session.sql(f"CREATE TABLE {s3_database}.managed USING parquet AS SELECT id FROM range(1000)")
    before = len(s3.requests())
    session.sql(f"ALTER TABLE {s3_database}.managed RENAME TO {s3_database}.moved")
    assert len(copies_since(s3, before)) >= 1
    assert count(spark, f"{s3_database}.moved") == 1000


def test_create_then_replace_on_s3_copy_nothing_at_publish(stack, spark, s3, s3_database, monkeypatch, tmp_path):
    target = f"{s3_database}.customers"
    reader = Reader(spark, target, interval=0.2).start()
    created, watch, values = run_watched(
        monkeypatch,
        s3,
        tmp_path / "create",
        make_dag("s3_create", target_table=target, sql=f"SELECT id, 'v1' AS v FROM range({OLD_ROWS})"),
        reader,
    )
    assert created.task_state == "success"
    assert watch.copies() == [], "a new table on S3 is published without copying an object"
    assert check_observations(values, {"missing", OLD_ROWS}, OLD_ROWS) is None, summarize(values)
    txn = xcom_value("s3_create", created.run_id, "ctas_transaction")
    assert txn["details"]["publish"] == {"mechanism": "rename", "seconds": pytest.approx(0, abs=30), "external": True}
    # An external table over the directory this try wrote (README: DROP TABLE leaves it to GC).
    assert table_type(spark, target) == "EXTERNAL"
    first_key = key_of(spark, target, S3_BUCKET)
    assert first_key.startswith(f"{s3_database}.db/__ctas_")

    reader = Reader(spark, target, interval=0.2).start()
    sticky = Reader(spark, target, interval=0.2, sticky=True).start()
    replaced, watch, values = run_watched(
        monkeypatch,
        s3,
        tmp_path / "replace",
        make_dag("s3_replace", target_table=target, mode="replace", sql=f"SELECT id, 'v2' AS v FROM range({NEW_ROWS})"),
        reader,
    )
    sticky_values = sticky.stop()
    assert replaced.task_state == "success"
    assert watch.copies() == [], "a flip on S3 copies nothing"
    assert check_observations(values, {OLD_ROWS, NEW_ROWS}, NEW_ROWS) is None, summarize(values)
    assert set(sticky_values) == {OLD_ROWS}, f"a session that never refreshes: {summarize(sticky_values)}"
    txn = xcom_value("s3_replace", replaced.run_id, "ctas_transaction")
    assert txn["details"]["publish"]["mechanism"] == "flip"
    assert keys(s3, S3_BUCKET, f"{first_key}/"), "the superseded version is kept for its retention"
    assert s3_leftovers(spark, s3, S3_BUCKET, s3_database) == []


def test_overwrite_partitions_on_s3_switches_several_without_copies(
    stack, spark, s3, s3_database, monkeypatch, tmp_path
):
    target = f"{s3_database}.events"

    def backfill(dag_id: str, days: list[str], rows: int) -> Any:
        sql = " UNION ALL ".join(f"SELECT id, '{day}' AS ds FROM range({rows})" for day in days)
        return make_dag(dag_id, target_table=target, mode="overwrite_partitions", partition_by=["ds"], sql=sql)

    first, watch, _ = run_watched(monkeypatch, s3, tmp_path / "first", backfill("s3_days_1", ["d1", "d2"], OLD_ROWS))
    assert first.task_state == "success"
    assert watch.copies() == [], "the first run creates the table: an external rename"
    reader = Reader(spark, target, where="ds IN ('d1', 'd2')", interval=0.2).start()
    second, watch, values = run_watched(
        monkeypatch, s3, tmp_path / "second", backfill("s3_days_2", ["d1", "d2", "d3"], NEW_ROWS // 2), reader
    )
    assert second.task_state == "success"
    assert watch.copies() == [], "partitions switch by location"
    # Both replaced partitions switch in one metastore call: all old (2 x 300) or all new (2 x 200).
    assert check_observations(values, {2 * OLD_ROWS, NEW_ROWS}, NEW_ROWS) is None, summarize(values)
    assert count(spark, target) == 3 * NEW_ROWS // 2
    assert s3_leftovers(spark, s3, S3_BUCKET, s3_database) == []


def test_a_failed_query_on_s3_leaves_nothing_and_credentials_stay_out_of_logs_and_xcom(
    stack, spark, s3, s3_database, tmp_path
):
    target = f"{s3_database}.broken"
    make_dag(
        "s3_broken",
        target_table=target,
        sql="SELECT id, IF(id = 150, raise_error('bad row'), id) AS x FROM range(0, 300, 1, 3)",
        # The worst place for a secret: the task's own Spark conf (a template field).
        conf={"spark.hadoop.fs.s3a.secret.key": SECRET_KEY},
    )
    log = tmp_path / "try.log"
    state = Trial(DAGS_FOLDER / "s3_broken.py", "s3_broken", "s3_broken_run", log).start().wait()
    assert state == "failed"
    txn = xcom_value("s3_broken", "s3_broken_run", "ctas_transaction")
    assert txn["details"]["error"]["code"] == "QUERY_FAILED"
    assert not table_exists(spark, target)
    assert s3_leftovers(spark, s3, S3_BUCKET, s3_database) == []
    assert keys(s3, S3_BUCKET, f"{s3_database}.db/__ctas_") == []
    assert SECRET_KEY not in log.read_text(errors="replace")
    assert SECRET_KEY not in json.dumps(txn)


S3_SLOW_SQL = (
    "SELECT id, 'v2' AS version, reflect('java.lang.Thread', 'sleep', "
    "CAST({{ 60 if ti.try_number == 1 else 0 }} AS BIGINT)) AS pause FROM range(0, 400, 1, 4)"
)


# The kill that leaves the most in the bucket (files, _temporary and an invisible multipart upload).
# A task killed at its flip recovers the same way on any filesystem (test_fault_matrix's
# task-kill-publish-flip); deleting a marked directory on S3 is proven here and in the swap test.
@pytest.mark.parametrize("fault", ["driver-mid-write"])
def test_faults_on_s3(stack, spark, s3, s3_database, tmp_path, fault):
    """Cells of the fault matrix on S3: try 1 is killed, try 2 needs no manual clean-up, and the
    bucket holds nothing of try 1 afterwards."""
    target = f"{s3_database}.t_{fault.replace('-', '_')}"
    mode = "create" if fault == "driver-mid-write" else "replace"
    if mode == "replace":
        fresh(spark).sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 'v1' AS version, CAST(NULL AS STRING) AS "
                         f"pause FROM range({OLD_ROWS})")  # fmt: skip
    dag_id = f"s3_fault_{fault.replace('-', '_')}"
    make_dag(dag_id, retries=1, target_table=target, mode=mode, sql=S3_SLOW_SQL)
    txn_id = TransactionKey(dag_id, "ctas", "s3_run").txn_id
    progress = tmp_path / "progress"
    faults: dict[str, Any] = {"progress_file": str(progress)}
    if fault == "task-kill-publish-flip":
        faults["before_publish"] = {"sleep": 60, "only_try": 1}
    reader = Reader(spark, target).start()
    started = time.monotonic()
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "s3_run", tmp_path / "try1.log", faults).start()
    staging_prefix = f"{s3_database}.db/__ctas_{txn_id[:16]}_s1/"
    if fault == "driver-mid-write":
        wait_until(
            "try 1 writes its staging",
            lambda: any("_temporary" in k for k in keys(s3, S3_BUCKET, staging_prefix)),
            timeout=240,
            observe=lambda: keys(s3, S3_BUCKET, staging_prefix),
        )
        time.sleep(1)
        # What a writer killed in the middle of a large file leaves: an upload no object listing shows.
        debris = f"{staging_prefix}part-00000-killed.snappy.parquet"
        s3.client().create_multipart_upload(Bucket=S3_BUCKET, Key=debris)
        assert uploads(s3, S3_BUCKET, staging_prefix)
        kill_spark_driver(f"{target} try 1")
    else:
        wait_for_line(progress, "before_publish try=1", timeout=240)
        first.signal_group(signal.SIGKILL)
    try1 = first.wait()
    wait_for_drivers_to_exit(target)
    try2 = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "s3_run", tmp_path / "try2.log").start().wait()
    values = reader.stop()
    left = s3_leftovers(spark, s3, S3_BUCKET, s3_database)
    rows = count(spark, target) if try2 == "success" else None
    allowed = {"missing", NEW_ROWS} if mode == "create" else {OLD_ROWS, NEW_ROWS}
    problem = check_observations(values, allowed, NEW_ROWS)
    outcome = (xcom_value(dag_id, "s3_run", "ctas_transaction") or {}).get("outcome")
    record_cell(
        f"s3-{fault}",
        {
            "order": 50 + (fault != "driver-mid-write"),
            "fault": "SIGKILL the Spark driver (S3)" if mode == "create" else "SIGKILL the Airflow task process (S3)",
            "when": "mid-write" if mode == "create" else "during publish (flip)",
            "mode": mode,
            "try1": try1,
            "left1": ["not inspected"],
            "try2": f"{try2} ({outcome})",
            "left2": left,
            "seen": summarize(values),
            "rows": rows,
            "ok": try2 == "success" and rows == NEW_ROWS and not left and problem is None,
            "seconds": round(time.monotonic() - started),
            "problem": problem,
        },
    )
    assert try2 == "success"
    assert rows == NEW_ROWS
    assert problem is None, f"{problem}: {summarize(values)}"
    assert left == [], f"left in the bucket after try 2: {left}"


def test_swap_and_gc_on_s3(stack, spark, s3, s3_database, monkeypatch, tmp_path):
    """A swap of a table this provider created on S3 renames external tables only (no copy); a
    managed table there is refused before any data is written; GC removes the data of a table
    dropped since (external tables keep their data on DROP TABLE) and keeps a superseded version
    within its retention."""
    target = f"{s3_database}.reshaped"
    assert run_dag(make_dag("s3_swap_seed", target_table=target, sql="SELECT id FROM range(300)")).task_state == (
        "success"
    )
    swap = make_dag(
        "s3_swap", target_table=target, mode="replace", allow_swap=True, sql="SELECT id, 'x' AS extra FROM range(400)"
    )
    swapped, watch, _ = run_watched(monkeypatch, s3, tmp_path, swap)
    monkeypatch.delenv("AIRFLOW_CTAS_FAULTS")
    assert swapped.task_state == "success"
    assert xcom_value("s3_swap", swapped.run_id, "ctas_transaction")["details"]["publish"]["mechanism"] == "swap"
    assert watch.copies() == [], "both renames of the swap are of external tables: metadata only"
    assert fresh(spark).table(target).columns == ["id", "extra"] and count(spark, target) == 400

    managed = f"{s3_database}.managed"
    fresh(spark).sql(f"CREATE TABLE {managed} USING parquet AS SELECT id FROM range(10)")
    refused = run_dag(
        make_dag("s3_swap_managed", target_table=managed, mode="replace", allow_swap=True, sql="SELECT 'a' AS b")
    )
    assert refused.task_state == "failed"
    error = xcom_value("s3_swap_managed", refused.run_id, "ctas_transaction")["details"]["error"]
    assert error["code"] == "UNSUPPORTED_TARGET" and "copy every object" in error["message"]
    assert count(spark, managed) == 10

    published = key_of(spark, target, S3_BUCKET)
    fresh(spark).sql(f"DROP TABLE {target}")
    assert keys(s3, S3_BUCKET, f"{published}/"), "DROP TABLE of an external table leaves its data"
    report = gc_cli("--database", s3_database, "--min-age", "0s", airflow=True)  # airflow ctas gc
    removed, kept = entries(report, "removed"), entries(report, "kept")
    assert any(what.endswith(published) for what in removed), report
    assert keys(s3, S3_BUCKET, f"{published}/") == []
    assert any("kept for readers until" in why for why in kept.values()), "the swapped-away version is retained"


FLAKY_BUCKET = "flaky"


@pytest.fixture
def flaky_database(spark, s3) -> Iterator[tuple[str, FaultProxy]]:
    """A database in a bucket this test process's Spark reaches through a fault proxy (S3A's
    per-bucket endpoint); the metastore service reaches the same bucket directly."""
    proxy = FaultProxy(("127.0.0.1", s3.port)).start()
    with contextlib.suppress(Exception):
        s3.client().create_bucket(Bucket=FLAKY_BUCKET)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {"endpoint": proxy.url, **FLAKY_RETRIES}
    for key, value in settings.items():
        conf.set(f"fs.s3a.bucket.{FLAKY_BUCKET}.{key}", value)
    name = f"flaky_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION 's3a://{FLAKY_BUCKET}/{name}.db'")
    # The session's catalog and SQL hold copies of the configuration taken when they were made, and
    # a filesystem is cached by bucket: the one for this bucket is made again from ``conf``.
    filesystem, bucket = spark._jvm.org.apache.hadoop.fs.FileSystem, spark._jvm.java.net.URI(f"s3a://{FLAKY_BUCKET}/")
    filesystem.get(bucket, conf).close()
    filesystem.get(bucket, conf)
    try:
        yield name, proxy
    finally:
        proxy.unavailable(False)
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
        for key in settings:
            conf.unset(f"fs.s3a.bucket.{FLAKY_BUCKET}.{key}")
        filesystem.get(bucket, conf).close()
        proxy.stop()


@contextlib.contextmanager
def _held_after_a_flip(
    spark: SparkSession, target: str, tmp_path: Path
) -> Iterator[tuple[str, SessionCatalogExecutor, list[BaseException]]]:
    """``target`` created with OLD_ROWS, then a replace with NEW_ROWS held right after its flip while
    the body runs: yields the location before, the try's executor and (once released) its failures."""
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id FROM range({OLD_ROWS})")
    before = location_uri(spark, target)
    flag, progress = tmp_path / "go", tmp_path / "progress"
    faults = {"after_location_change": {"wait_for": str(flag)}, "progress_file": str(progress)}
    executor = executor_for(spark, target, f"SELECT id FROM range({NEW_ROWS})", mode="replace", faults=faults)
    with held_at(executor, "after_location_change", flag, progress) as failures:
        yield before, executor, failures


def test_s3_down_right_after_a_flip_undoes_it_and_the_next_run_publishes(spark, s3, flaky_database, tmp_path):
    """A real network fault between a flip and its fence re-check: the object store answers every
    request of the driver 503 (a proxy in front of it), so the re-check cannot read the staging's
    marker. Unconfirmed is not ours: the flip is undone and the try fails with PUBLISH_FAILED, so a
    failed task leaves no new version; once the store is back its abort leaves nothing, and the next
    run publishes."""
    database, proxy = flaky_database
    target = f"{database}.flipped"
    started = time.monotonic()
    with _held_after_a_flip(spark, target, tmp_path) as (before, executor, failures):
        assert proxy.connections > 0, "the driver reaches the bucket through the proxy"
        assert location_uri(spark, target) != before, "flipped"
        proxy.unavailable()
    error = failures[0] if failures else None
    down_answers = proxy.unavailable_answers
    proxy.unavailable(False)
    undone = location_uri(spark, target) == before
    rows_after_failure = count(spark, target)
    executor.run("abort", PhaseReport("abort", "ok", 0.0))  # what the task's failure callback runs
    left = s3_leftovers(spark, s3, FLAKY_BUCKET, database)
    retry = executor_for(spark, target, f"SELECT id FROM range({NEW_ROWS})", mode="replace")
    run_all(retry)
    rows, left2 = count(spark, target), s3_leftovers(spark, s3, FLAKY_BUCKET, database)
    code = getattr(error, "code", None)
    ok = code == "PUBLISH_FAILED" and undone and rows_after_failure == OLD_ROWS and not left and rows == NEW_ROWS
    record_cell(
        "s3-unavailable-after-flip",
        {
            "order": 52,
            "fault": "S3 answers every request of the driver 503 (a proxy in front of the S3 server) "
            "between the flip and its fence re-check",
            "when": "publish (flip), before its re-check",
            "mode": "replace",
            "try1": f"failed ({code}), the flip undone" if undone else f"failed ({code}), flip NOT undone",
            "left1": left,
            "try2": "next run: success (published)",
            "left2": left2,
            "seen": f"{OLD_ROWS} after the failure",
            "rows": rows,
            "ok": ok and not left2,
            "seconds": round(time.monotonic() - started),
            "problem": None if ok else f"{error!r}",
        },
    )
    assert code == "PUBLISH_FAILED", repr(error)
    assert down_answers > 0, "the driver's re-check reached the proxy"
    assert undone and rows_after_failure == OLD_ROWS, "a failed try leaves the previous version"
    assert left == [] and left2 == []
    assert rows == NEW_ROWS


def test_s3_throttling_at_a_publish_is_retried_and_the_publish_lands(spark, s3, flaky_database, tmp_path):
    """The object store throttles the driver (503) right after a flip, for two requests, and then
    recovers: the re-check's reads are retried by S3A (no setting of this provider turns its retries
    off) and the publish lands, with nothing left over."""
    database, proxy = flaky_database
    target = f"{database}.throttled"
    started = time.monotonic()
    with _held_after_a_flip(spark, target, tmp_path) as (before, _, failures):
        proxy.throttle(2)
    throttled, flipped = proxy.unavailable_answers, location_uri(spark, target) != before
    rows, left = count(spark, target), s3_leftovers(spark, s3, FLAKY_BUCKET, database)
    ok = not failures and throttled == 2 and flipped and rows == NEW_ROWS and not left
    record_cell(
        "s3-throttled-after-flip",
        {
            "order": 53,
            "fault": "S3 answers the driver's next two requests 503 (a proxy in front of the S3 server) between "
            "the flip and its fence re-check, then recovers",
            "when": "publish (flip), before its re-check",
            "mode": "replace",
            "try1": f"failed: {failures[0]!r}" if failures else "success (published; S3A retried the throttled reads)",
            "left1": left,
            "try2": "none",
            "left2": left,
            "seen": f"{throttled} requests answered 503",
            "rows": rows,
            "ok": ok,
            "seconds": round(time.monotonic() - started),
            "problem": None if ok else f"failures {failures!r}, throttled {throttled}, flipped {flipped}",
        },
    )
    assert failures == [], failures
    assert throttled == 2, "the driver's requests after the flip met the throttling"
    assert flipped and rows == NEW_ROWS
    assert left == []
