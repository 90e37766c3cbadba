"""Durable tries on a real metastore and real Spark: a prepared try's staging survives its task,
the next try publishes it without running the query, two adopters never both publish, and a
changed query is run again.

The query reads a source table that grows between the tries: a try that ran the query again
would publish the grown source, one that adopted publishes what try 1 wrote.

Run: bash scripts/test.sh tests/integration/test_durable.py
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from typing import Any

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.durable import digest_of
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseReport, PhaseRequest
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.spark.engine import CONNECT_MODE_VARIABLES
from tests.support.catalog import count, database_dir, leftovers, location_uri
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import Trial, wait_for_drivers_to_exit
from tests.support.phases import QuietReporter, executor_for, run_all
from tests.support.processes import wait_for_line

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.faults]

SOURCE_ROWS, GROWN_BY = 300, 50


ROWS = "SELECT id, CAST(id % 3 AS STRING) AS p FROM range({start}, {end})"


def _source(spark: Any, database: str, name: str) -> str:
    source = f"{database}.{name}"
    spark.sql(f"CREATE TABLE {source} USING parquet AS {ROWS.format(start=0, end=SOURCE_ROWS)}")
    return source


def _grow(spark: Any, source: str) -> None:
    spark.sql(f"INSERT INTO {source} {ROWS.format(start=SOURCE_ROWS, end=SOURCE_ROWS + GROWN_BY)}")


class Tries:
    """Tries of one transaction, each run phase by phase in this process as a driver runs them."""

    def __init__(self, spark: Any, target: str, sql: str, **options: Any) -> None:
        for variable in CONNECT_MODE_VARIABLES:  # a classic driver's environment (tests/support/phases.py)
            os.environ.pop(variable, None)
        self.spark, self.sql, self.options = spark, sql, {"table_format": "parquet", **options}
        self.key = TransactionKey("durable_dag", "ctas", f"run_{uuid.uuid4().hex}")
        self.target = target

    def table(self, try_number: int) -> SessionCatalogTable:
        table = create_two_phase_table(key=self.key, conn_id="spark_default", target=self.target, **self.options)
        assert isinstance(table, SessionCatalogTable)
        table.begin(try_number, "2026-11-28T00:00:00+00:00")
        return table

    def executor(
        self, try_number: int, *, sql: str | None = None, faults: dict[str, Any] | None = None
    ) -> SessionCatalogExecutor:
        table, sql = self.table(try_number), sql or self.sql
        digest = digest_of(sql, {"target": str(table.target), **table.spec_to_dict()}, [], {})
        request = PhaseRequest(phases=RUN_PHASES, table=table.to_dict(), sql=sql, durable=digest, faults=faults or {})
        return SessionCatalogExecutor(self.spark, table, request, QuietReporter())


def _run(executor: SessionCatalogExecutor, *phases: str) -> list[PhaseReport]:
    reports = []
    for phase in phases:
        report = PhaseReport(phase, "ok", 0.0)
        executor.run(phase, report)
        reports.append(report)
    return reports


def _prepared_then_lost(tries: Tries) -> None:
    """Try 1 writes and records its staging, then its task is gone: the driver stops there."""
    first = tries.executor(1)
    _run(first, "begin", "prepare")
    first.keep_for_next_try(first.ctx.request.durable or "")


# (mode options, the seeded target's CREATE TABLE tail): one case per kind of staging and publish.
CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    "create-rename": ({"mode": "create"}, None),  # a managed staging table, renamed
    "replace-flip": ({"mode": "replace"}, "AS SELECT id, CAST(id % 3 AS STRING) AS p FROM range(5)"),  # a directory
    "replace-swap": ({"mode": "replace", "allow_swap": True}, None),  # an external table
    "overwrite_partitions": (  # a directory of partitions, switched in
        {"mode": "overwrite_partitions", "partition_by": ["p"]},
        "PARTITIONED BY (p) AS SELECT id, CAST(id % 3 AS STRING) AS p FROM range(5)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_next_try_adopts_the_prepared_staging_and_of_two_adopters_only_the_newer_publishes(case, spark, database):
    options, seed = CASES[case]
    target = f"{database}.t_{case.replace('-', '_')}"
    if case == "replace-swap":  # seeded by this provider, so that the swap may drop the version it replaces
        run_all(executor_for(spark, target, "SELECT id FROM range(5)", mode="create"))
    elif seed is not None:
        spark.sql(f"CREATE TABLE {target} USING parquet {seed}")
    source = _source(spark, database, f"src_{case.replace('-', '_')}")
    tries = Tries(spark, target, f"SELECT id, p FROM {source}", **options)
    _prepared_then_lost(tries)
    _grow(spark, source)

    second, third = tries.executor(2), tries.executor(3)
    begin2, prepare2 = _run(second, "begin", "prepare")
    assert second.ctx.adopted is not None and "adopted" in " ".join(begin2.touched)
    assert "the query did not run" in prepare2.note and second.details["row_count"] == SOURCE_ROWS
    _run(third, "begin", "prepare")  # a newer try (a clear while try 2 ran) adopts it from try 2
    assert third.ctx.adopted is not None and third.ctx.adopted.record.held_by_try == 2

    with pytest.raises(FencedError):
        _run(second, "commit")
    assert not second.published
    _run(third, "commit")
    assert third.published
    assert count(spark, target) == SOURCE_ROWS, "the adopted version is what try 1 wrote, not a new run of the query"
    assert leftovers(spark, database) == []
    if case in ("replace-flip", "replace-swap"):  # published where try 1 wrote it
        assert location_uri(spark, target).rstrip("/").endswith("_s1")


@pytest.mark.parametrize("resumes", ["after the newer try published", "before the newer try publishes"])
def test_a_try_held_past_its_commit_check_while_a_newer_try_adopts_its_staging_publishes_nothing(
    resumes, spark, database, tmp_path
):
    """The chaos soak's seed 1223369283: a durable create's try 1 passed commit's check of its
    staging and was held at before_publish while its task instance was cleared; try 2 took the
    staging over and published it; try 1, released, reported the table published by itself
    (already_published) and succeeded. A superseded try must fail FENCED: if it resumes before the
    newer try publishes, its rename would publish a staging it no longer holds."""
    target = f"{database}.t_held_{'after' if resumes.startswith('after') else 'before'}"
    source = _source(spark, database, f"src_held_{target.rsplit('_', 1)[1]}")
    tries = Tries(spark, target, f"SELECT id, p FROM {source}", mode="create")
    progress, release = tmp_path / "progress", tmp_path / "release"
    first = tries.executor(
        1, faults={"progress_file": str(progress), "before_publish": {"wait_for": str(release), "only_try": 1}}
    )
    _run(first, "begin", "prepare")
    first.keep_for_next_try(first.ctx.request.durable or "")
    failures: list[BaseException] = []

    def commit() -> None:
        try:
            _run(first, "commit")
        except BaseException as exc:
            failures.append(exc)

    held = threading.Thread(target=commit)
    held.start()
    wait_for_line(progress, "before_publish try=1", timeout=120)  # past commit's check of its staging
    second = tries.executor(2)
    _run(second, "begin", "prepare")
    assert second.ctx.adopted is not None, "try 2 takes try 1's staging over"
    if resumes.startswith("after"):
        _run(second, "commit")
    release.touch()
    held.join(timeout=120)
    if not resumes.startswith("after"):
        _run(second, "commit")

    assert [type(f) for f in failures] == [FencedError], failures
    assert not first.published and second.published
    assert count(spark, target) == SOURCE_ROWS
    assert leftovers(spark, database) == []


def test_a_changed_query_is_run_again_and_the_earlier_staging_removed(spark, database):
    target = f"{database}.t_changed"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, CAST(id % 3 AS STRING) AS p FROM range(5)")
    source = _source(spark, database, "src_changed")
    tries = Tries(spark, target, f"SELECT id, p FROM {source}", mode="replace")
    _prepared_then_lost(tries)
    _grow(spark, source)

    second = tries.executor(2, sql=f"SELECT id, p FROM {source} WHERE id >= 0")
    _run(second, "begin", "prepare", "commit")
    assert second.ctx.adopted is None and second.published
    assert count(spark, target) == SOURCE_ROWS + GROWN_BY
    assert leftovers(spark, database) == []


def test_a_worker_lost_after_the_write_costs_the_next_try_no_query(stack, spark, database, tmp_path):
    """Real processes: try 1's task and its supervisor are SIGKILLed while its driver waits for
    the decision; the driver keeps its staging and exits; try 2 publishes it without a query."""
    target = f"{database}.t_worker_lost"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, CAST(id % 3 AS STRING) AS p FROM range(5)")
    source = _source(spark, database, "src_worker_lost")
    dag_id, run_id = "durable_worker_lost", "durable__worker_lost"
    make_dag(dag_id, retries=2, target_table=target, mode="replace", sql=f"SELECT id, p FROM {source}", durable=True)
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "before_decision": {"sleep": 600, "only_try": 1}}
    first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try1.log", faults).start()
    wait_for_line(progress, "before_decision try=1", timeout=240)
    first.signal_group(signal.SIGKILL)
    assert first.wait().startswith("killed")
    wait_for_drivers_to_exit(target)
    txn_tag = TransactionKey(dag_id, "ctas", run_id).txn_id[:16]
    kept = database_dir(spark, database) / f"__ctas_{txn_tag}_s1"
    assert (kept / "_airflow_ctas_prepared.json").exists(), "the driver dropped what its lost task had prepared"
    _grow(spark, source)

    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try2.log").start()
    assert second.wait() == "success"
    log = (tmp_path / "try2.log").read_text(errors="replace")
    assert "adopted the staging of try 1; the query did not run" in log
    assert count(spark, target) == SOURCE_ROWS
    assert location_uri(spark, target).rstrip("/").endswith(kept.name)
    assert (xcom_value(dag_id, run_id, "ctas_transaction") or {}).get("outcome") == "published"
    assert leftovers(spark, database) == []
    assert not (kept / "_airflow_ctas_prepared.json").exists()
