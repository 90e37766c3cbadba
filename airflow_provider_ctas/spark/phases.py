"""Run the phases a request names against a SparkSession, classic or Spark Connect.

spark-submit's application (``app.py``) calls this inside the Spark driver; the Spark Connect
runner calls it in the Airflow task process, against a remote session.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs import load_two_phase_table
from airflow_provider_ctas.catalogs.session_catalog.catalog import first_line
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor, classify
from airflow_provider_ctas.catalogs.session_catalog.gc import GcParams, SessionCatalogGc
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.errors import CoordinatorLostError, CorruptStateError
from airflow_provider_ctas.spark.coordinator_link import CoordinatorLink
from airflow_provider_ctas.spark.engine import Reporter, engine_for
from airflow_provider_ctas.spark.protocol import GC_PHASES, PhaseReport, PhaseRequest, PhaseResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The allowlist of kinds this application can execute; the request names a kind, never a class.
EXECUTORS = {SessionCatalogTable.kind: SessionCatalogExecutor}


def run_gc(spark: SparkSession, request: PhaseRequest, log: Reporter) -> PhaseResult:
    started = time.monotonic()
    report = SessionCatalogGc(spark, GcParams.from_dict(request.gc or {}), log).run()
    seconds = round(time.monotonic() - started, 3)
    log.info(f"gc: done in {seconds:.2f}s: {report['summary']}")
    return PhaseResult(ok=True, reached="gc", details=report, phases=[PhaseReport("gc", "ok", seconds)])


def run_phases(spark: SparkSession, request: PhaseRequest, log: Reporter) -> PhaseResult:
    engine_for(spark).start()
    if request.phases == GC_PHASES:
        return run_gc(spark, request, log)
    result = PhaseResult()
    table = load_two_phase_table(request.table)
    if not isinstance(table, SessionCatalogTable) or table.kind not in EXECUTORS:
        raise CorruptStateError(f"no executor for kind {table.kind!r}")
    executor = EXECUTORS[table.kind](spark, table, request, log)
    label = f"{table.target} (transaction {table.txn_id}, try {table.try_number})"
    link = _link(spark, request, table, log)
    try:
        _run_each(executor, request, result, label, link, log)
    finally:
        if link is not None:
            link.close()
    result.ok = result.error is None
    result.reached = "aborted" if result.cleaned_up else executor.reached
    result.outcome = executor.outcome.value if executor.outcome else None
    result.details = dict(executor.details)
    jobs = executor.catalog.engine.job_count()
    if jobs is not None:
        result.details["spark_jobs"] = jobs
    return result


def _link(
    spark: SparkSession, request: PhaseRequest, table: SessionCatalogTable, log: Reporter
) -> CoordinatorLink | None:
    """Connect to the deciding task (spark-submit runs only); Spark Connect runs phases in the task itself."""
    if request.coordinator is None:
        return None

    def lost(reason: str) -> None:
        log.warning(f"coordinator lost: {reason}; cancelling this driver's Spark jobs, publishing nothing")
        spark.sparkContext.cancelAllJobs()

    link = CoordinatorLink(request.coordinator, table.txn_id, table.try_number, lost)
    link.connect()
    return link


def _run_each(
    executor: SessionCatalogExecutor,
    request: PhaseRequest,
    result: PhaseResult,
    label: str,
    link: CoordinatorLink | None,
    log: Reporter,
) -> None:
    table = executor.table
    for phase in request.phases:
        if executor.skip_rest:
            result.phases.append(PhaseReport(phase, "skipped", 0.0, note=f"outcome {executor.outcome}"))
            continue
        log.info(f"{phase}: starting for {label}")
        report = PhaseReport(phase, "ok", 0.0)
        started = time.monotonic()
        try:
            if link is not None:
                link.check()
                if phase == "commit":
                    seconds = link.await_commit()
                    report.note = f"the task decided commit in {seconds * 1000:.0f} ms"
                    log.info(f"commit: {report.note}")
            getattr(executor, phase)(report)
        except Exception as exc:
            report.status, report.seconds = "failed", round(time.monotonic() - started, 3)
            result.phases.append(report)
            error = classify(exc)
            if link is not None and link.lost is not None and not executor.published:
                error = CoordinatorLostError(f"{phase} stopped: {link.lost}; nothing was published")
            result.error = {"code": error.code, "message": str(error), "phase": phase}
            log.warning(f"{phase}: failed after {report.seconds:.2f}s: {error}")
            if phase != "abort" and not executor.published:
                result.cleaned_up = _abort_in_driver(executor, table.try_number, log)
            return
        report.seconds = round(time.monotonic() - started, 3)
        result.phases.append(report)
        touched = "; ".join(report.touched) or "nothing"
        log.info(f"{phase}: ok in {report.seconds:.2f}s; touched: {touched}")


def _abort_in_driver(executor: SessionCatalogExecutor, try_number: int, log: Reporter) -> bool:
    started = time.monotonic()
    try:
        touched = executor.clean_tries(up_to=try_number)
    except Exception as exc:
        log.warning(f"abort: could not clean up in the driver ({first_line(exc)}); an abort run will")
        return False
    log.info(f"abort: ok in {time.monotonic() - started:.2f}s; touched: {'; '.join(touched) or 'nothing'}")
    return True


def record_progress(result: PhaseResult, request: PhaseRequest) -> None:
    """Test-only (``AIRFLOW_CTAS_FAULTS``): what a run did, even after its task process was killed."""
    progress = request.faults.get("progress_file")
    if isinstance(progress, str):
        with open(progress, "a") as handle:
            code = (result.error or {}).get("code", "")
            handle.write(f"result phases={','.join(request.phases)} ok={result.ok} {code}\n")
