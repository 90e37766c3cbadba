"""Run the phases a request names against a SparkSession, classic or Spark Connect.

spark-submit's application (``app.py``) calls this inside the Spark driver; the Spark Connect
runner calls it in the Airflow task process, against a remote session. Which executor runs a
table is the strategy registry's answer for the table's kind, never a class named in the request.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs import STRATEGIES, gc_strategy, load_two_phase_table, strategy_of_kind
from airflow_provider_ctas.core.errors import CoordinatorLostError
from airflow_provider_ctas.core.protocol import GC_PHASES, PhaseReport, PhaseRequest, PhaseResult, Reached, error_info
from airflow_provider_ctas.core.transaction import TwoPhaseTable
from airflow_provider_ctas.spark.coordinator_link import CoordinatorLink
from airflow_provider_ctas.spark.engine import Reporter, engine_for
from airflow_provider_ctas.spark.errors import classify, first_line
from airflow_provider_ctas.spark.runtime import check_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.catalogs.strategy import Executor


def run_gc(spark: SparkSession, request: PhaseRequest, log: Reporter) -> PhaseResult:
    started = time.monotonic()
    settings = dict(request.gc or {})
    kind = str(settings.pop("kind", None) or gc_strategy(None).kind)
    readers = [strategy.staging_reader for strategy in STRATEGIES if strategy.staging_reader is not None]
    report = strategy_of_kind(kind).driver().gc(spark, settings, log, readers)
    seconds = round(time.monotonic() - started, 3)
    log.info(f"gc: done in {seconds:.2f}s: {report['summary']}")
    return PhaseResult(ok=True, reached=Reached.GC, details=report, phases=[PhaseReport("gc", "ok", seconds)])


def run_phases(spark: SparkSession, request: PhaseRequest, log: Reporter) -> PhaseResult:
    engine_for(spark).start()
    if (warning := check_spark(spark.version)) is not None:
        log.warning(warning)
    if request.phases == GC_PHASES:
        return run_gc(spark, request, log)
    result = PhaseResult()
    table = load_two_phase_table(request.table)
    executor = strategy_of_kind(table.kind).driver().executor(spark, table, request, log)
    label = f"{table.target} (transaction {table.txn_id}, try {table.try_number})"
    link = _link(spark, request, table, log)
    try:
        _run_each(executor, table, request, result, label, link, log, spark)
        result.ok = result.error is None
        result.reached = Reached.ABORTED if result.cleaned_up else executor.reached
        result.outcome = executor.outcome
        result.details = {**executor.details, **result.details}
        jobs = executor.spark_jobs()
        if jobs is not None:
            result.details["spark_jobs"] = jobs
        if link is not None:
            link.send_result(result.to_json())
    finally:
        if link is not None:
            link.close()
    return result


def _link(spark: SparkSession, request: PhaseRequest, table: TwoPhaseTable, log: Reporter) -> CoordinatorLink | None:
    """Connect to the deciding task (spark-submit runs only); Spark Connect runs phases in the task itself."""
    if request.coordinator is None:
        return None

    def lost(reason: str) -> None:
        if link.writing_on:
            log.warning(
                f"coordinator lost: {reason}; durable=True in cluster deploy mode: finishing the write and keeping "
                "it for the next try, publishing nothing"
            )
            return
        log.warning(f"coordinator lost: {reason}; cancelling this driver's Spark jobs, publishing nothing")
        spark.sparkContext.cancelAllJobs()

    link = CoordinatorLink(
        request.coordinator, table.txn_id, table.try_number, lost, durable=request.durable is not None
    )
    link.connect(log.info)
    return link


def _run_each(
    executor: Executor,
    table: TwoPhaseTable,
    request: PhaseRequest,
    result: PhaseResult,
    label: str,
    link: CoordinatorLink | None,
    log: Reporter,
    spark: SparkSession,
) -> None:
    for phase in request.phases:
        if executor.nothing_to_do:
            result.phases.append(PhaseReport(phase, "skipped", 0.0, note=f"outcome {executor.outcome}"))
            continue
        log.info(f"{phase}: starting for {label}")
        report = PhaseReport(phase, "ok", 0.0)
        started = time.monotonic()
        try:
            if phase == "commit":
                _record_for_next_try(executor, request, result, log)
            if link is not None:
                if phase == "commit" or not link.writing_on:
                    link.check()
                if phase == "commit":
                    seconds = link.await_commit()
                    report.note = f"the task decided commit in {seconds * 1000:.0f} ms"
                    log.info(f"commit: {report.note}")
            executor.run(phase, report)
        except Exception as exc:  # noqa: BLE001 - the phase's failure is reported with its code
            report.status, report.seconds = "failed", round(time.monotonic() - started, 3)
            result.phases.append(report)
            error = classify(exc)
            if link is not None and link.lost is not None and not executor.published:
                error = CoordinatorLostError(f"{phase} stopped: {link.lost}; nothing was published")
            result.error = error_info(error.code, str(error), phase)
            log.warning(f"{phase}: failed after {report.seconds:.2f}s: {error}")
            result.cleaned_up = _after_failure(phase, result, link, executor, log, spark)
            return
        report.seconds = round(time.monotonic() - started, 3)
        result.phases.append(report)
        if phase == "prepare":  # the history's ``prepared`` entry: when the write finished, not when the task heard
            result.details["prepared_at"] = datetime.now(UTC).isoformat()
        touched = "; ".join(report.touched) or "nothing"
        log.info(f"{phase}: ok in {report.seconds:.2f}s; touched: {touched}")


def _after_failure(
    phase: str,
    result: PhaseResult,
    link: CoordinatorLink | None,
    executor: Executor,
    log: Reporter,
    spark: SparkSession,
) -> bool:
    """Clean up this try's staging in the driver (True when done), unless it was published, this
    was the abort itself, or it stays for the next try. Published: what the publish would have
    removed of older tries next (their deferred staging directories), so a task that Airflow then
    records as successful leaves none of it for garbage collection (the chaos soak's seed 1167869720)."""
    if phase == "commit" and executor.published:
        touched = executor.clean_up_after_publish()
        log.info(f"commit: published before it failed; touched: {'; '.join(touched) or 'nothing'}")
        return False
    if _kept_for_next_try(phase, result, link, executor):
        log.warning("commit: the task is lost; the prepared staging stays for the next try (durable=True)")
        return False
    if phase != "abort" and not executor.published:
        return _abort_in_driver(executor, log, spark)
    return False


def _record_for_next_try(executor: Executor, request: PhaseRequest, result: PhaseResult, log: Reporter) -> None:
    """With durable=True, the record that lets the next try adopt this staging. Without it the
    staging is not adoptable, which is today's behaviour: a failure to write it fails nothing."""
    if not request.durable:
        return
    try:
        kept = executor.keep_for_next_try(request.durable)
    except Exception as exc:  # noqa: BLE001 - durability is lost for this try, nothing else
        log.warning(f"prepare: could not record this staging for the next try ({first_line(exc)}); going on")
        return
    result.details["prepared_record"] = kept
    log.info(f"prepare: recorded at {kept} for the next try, should this task be lost (durable=True)")


def _kept_for_next_try(phase: str, result: PhaseResult, link: CoordinatorLink | None, executor: Executor) -> bool:
    """Durable tries: a driver whose task was lost (not one that decided abort) while it waited
    for the decision keeps its recorded staging for the next try, which adopts it."""
    return (
        phase == "commit"
        and "prepared_record" in result.details
        and link is not None
        and link.lost is not None
        and not link.aborted
        and not executor.published
    )


def _abort_in_driver(executor: Executor, log: Reporter, spark: SparkSession) -> bool:
    started = time.monotonic()
    try:
        if running := engine_for(spark).settle():
            log.warning(f"abort: {running} task(s) of the failed job still run; cleaning up all the same")
        touched = executor.clean_up_this_try()
    except Exception as exc:  # noqa: BLE001 - an abort run (or GC) cleans up instead; the failure stays the first error
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
