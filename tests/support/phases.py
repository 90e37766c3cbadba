"""The session-catalog strategy's phases run in the test's own Spark session (no Airflow, no
spark-submit): for tests that look at the catalog between two steps of one try."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseReport, PhaseRequest
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.spark.engine import CONNECT_MODE_VARIABLES, is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class QuietReporter:
    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        pass


def executor_for(spark: SparkSession, target: str, sql: str, *, faults: dict[str, Any] | None = None,
                 key: TransactionKey | None = None, try_number: int = 1,
                 **options: Any) -> SessionCatalogExecutor:  # fmt: skip
    """Try ``try_number`` of transaction ``key`` (a new one by default) on ``target`` (parquet unless
    ``options`` say otherwise).

    Given a classic session, the phases run as a classic driver runs them, so this process's
    environment is made a classic driver's first (``driver/app.py`` does the same): an earlier test in
    this worker that made a Spark Connect session leaves SPARK_CONNECT_MODE_ENABLED set, which turns
    pyspark's ``Observation()`` into Connect's. Given a Connect session, they run as the Connect
    runner runs them in a task process."""
    if not is_connect(spark):
        for variable in CONNECT_MODE_VARIABLES:
            os.environ.pop(variable, None)
    txn = create_two_phase_table(
        key=key or TransactionKey("in_process_dag", "ctas", f"run_{uuid.uuid4().hex}"),
        conn_id="spark_default",
        target=target,
        **{"table_format": "parquet", **options},
    )
    assert isinstance(txn, SessionCatalogTable)
    txn.begin(try_number, "2024-01-01T00:00:00+00:00")
    request = PhaseRequest(phases=RUN_PHASES, table=txn.to_dict(), sql=sql, faults=faults or {})
    return SessionCatalogExecutor(spark, txn, request, QuietReporter())


def run_all(executor: SessionCatalogExecutor) -> None:
    """The phases of a run, stopping after begin when it found nothing to do (as the driver does)."""
    for phase in RUN_PHASES:
        executor.run(phase, PhaseReport(phase, "ok", 0.0))
        if executor.nothing_to_do:
            return


def run_on_thread(executor: SessionCatalogExecutor) -> tuple[threading.Thread, list[BaseException]]:
    """The try's phases on a started thread, and the list the exceptions they raise go to."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            run_all(executor)
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    return worker, failures


@contextlib.contextmanager
def held_at(executor: SessionCatalogExecutor, point: str, flag: Path, progress: Path) -> Iterator[list[BaseException]]:
    """The try's phases on a thread, held at ``point`` (its fault waits for ``flag``) while the body
    runs; released and joined on exit. Yields the exceptions the phases raised."""
    worker, failures = run_on_thread(executor)
    try:
        for _ in range(600):
            if progress.exists() and point in progress.read_text():
                break
            threading.Event().wait(0.1)
        yield failures
    finally:
        flag.touch()
        worker.join(timeout=300)
