"""The PySpark application that spark-submit runs for the phases of a transaction.

One submission runs begin, prepare and commit back to back (the same single Spark process a plain
CREATE TABLE AS SELECT needs); a separate submission runs abort when a failure left something
behind. When a phase fails before the publish, this try's staging is removed right here, so the
common failure (bad SQL, a failed job) needs no second Spark process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs import load_two_phase_table
from airflow_provider_ctas.catalogs.session_catalog.catalog import first_line
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor, classify
from airflow_provider_ctas.catalogs.session_catalog.gc import GcParams, SessionCatalogGc
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.errors import CorruptStateError
from airflow_provider_ctas.spark.protocol import (
    GC_PHASES,
    RESULT_LINE_PREFIX,
    PhaseReport,
    PhaseRequest,
    PhaseResult,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The allowlist of kinds this application can execute; the request names a kind, never a class.
EXECUTORS = {SessionCatalogTable.kind: SessionCatalogExecutor}
JOB_GROUP = "airflow-ctas"


class ConsoleReporter:
    """Prints phase progress to stdout, which spark-submit streams into the Airflow task log."""

    prefix = "[airflow-ctas]"

    def _emit(self, level: str, message: str) -> None:
        # The task that read our output may be gone (killed); keep working regardless.
        with contextlib.suppress(OSError):
            print(f"{self.prefix} {level}: {message}", flush=True)

    def info(self, message: str) -> None:
        self._emit("INFO", message)

    def warning(self, message: str) -> None:
        self._emit("WARNING", message)


def run_gc(spark: SparkSession, request: PhaseRequest, log: ConsoleReporter) -> PhaseResult:
    started = time.monotonic()
    report = SessionCatalogGc(spark, GcParams.from_dict(request.gc or {}), log).run()
    seconds = round(time.monotonic() - started, 3)
    log.info(f"gc: done in {seconds:.2f}s: {report['summary']}")
    return PhaseResult(ok=True, reached="gc", details=report, phases=[PhaseReport("gc", "ok", seconds)])


def run_phases(spark: SparkSession, request: PhaseRequest, log: ConsoleReporter) -> PhaseResult:
    if request.phases == GC_PHASES:
        return run_gc(spark, request, log)
    result = PhaseResult()
    table = load_two_phase_table(request.table)
    if not isinstance(table, SessionCatalogTable) or table.kind not in EXECUTORS:
        raise CorruptStateError(f"no executor for kind {table.kind!r}")
    executor = EXECUTORS[table.kind](spark, table, request, log)
    label = f"{table.target} (transaction {table.txn_id}, try {table.try_number})"
    for phase in request.phases:
        if executor.skip_rest:
            result.phases.append(PhaseReport(phase, "skipped", 0.0, note=f"outcome {executor.outcome}"))
            continue
        log.info(f"{phase}: starting for {label}")
        report = PhaseReport(phase, "ok", 0.0)
        started = time.monotonic()
        try:
            getattr(executor, phase)(report)
        except Exception as exc:
            report.status, report.seconds = "failed", round(time.monotonic() - started, 3)
            result.phases.append(report)
            error = classify(exc)
            result.error = {"code": error.code, "message": str(error), "phase": phase}
            log.warning(f"{phase}: failed after {report.seconds:.2f}s: {error}")
            if phase != "abort" and not executor.published:
                result.cleaned_up = _abort_in_driver(executor, table.try_number, log)
            break
        report.seconds = round(time.monotonic() - started, 3)
        result.phases.append(report)
        touched = "; ".join(report.touched) or "nothing"
        log.info(f"{phase}: ok in {report.seconds:.2f}s; touched: {touched}")
    result.ok = result.error is None
    result.reached = "aborted" if result.cleaned_up else executor.reached
    result.outcome = executor.outcome.value if executor.outcome else None
    result.details = dict(executor.details)
    result.details["spark_jobs"] = len(spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP))
    return result


def _abort_in_driver(executor: SessionCatalogExecutor, try_number: int, log: ConsoleReporter) -> bool:
    started = time.monotonic()
    try:
        touched = executor.clean_tries(up_to=try_number)
    except Exception as exc:
        log.warning(f"abort: could not clean up in the driver ({first_line(exc)}); an abort run will")
        return False
    log.info(f"abort: ok in {time.monotonic() - started:.2f}s; touched: {'; '.join(touched) or 'nothing'}")
    return True


def _request_path(argument: str) -> str:
    if os.path.exists(argument):
        return argument
    from pyspark import SparkFiles

    return SparkFiles.get(os.path.basename(argument))  # cluster mode: shipped with --files


def _emit_result(result: PhaseResult, request: PhaseRequest | None, log: ConsoleReporter) -> None:
    text = result.to_json()
    progress = request.faults.get("progress_file") if request else None
    if isinstance(progress, str):  # test-only: what a driver did after its task process was killed
        with open(progress, "a") as handle:
            code = (result.error or {}).get("code", "")
            handle.write(f"result phases={','.join(request.phases) if request else ''} ok={result.ok} {code}\n")
    if request is not None and request.result_path:
        try:
            with open(request.result_path, "w") as handle:
                handle.write(text)
        except OSError:
            log.info("result file not reachable from this driver (cluster mode); exit status only")
    log.info(RESULT_LINE_PREFIX + text)


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    args = sys.argv[1:] if argv is None else argv
    log = ConsoleReporter()
    if len(args) != 1:
        log.warning("usage: airflow_ctas_app.py <request.json>")
        return 2
    spark = SparkSession.builder.enableHiveSupport().getOrCreate()
    spark.conf.set("spark.sql.parser.escapedStringLiterals", "false")
    spark.sparkContext.setJobGroup(JOB_GROUP, "airflow-provider-ctas")
    request: PhaseRequest | None = None
    try:
        with open(_request_path(args[0])) as handle:
            request = PhaseRequest.from_json(handle.read())
        result = run_phases(spark, request, log)
    except Exception as exc:
        error = classify(exc)
        result = PhaseResult(error={"code": error.code, "message": str(error), "phase": "load"})
        log.warning(f"cannot run: {error}")
    _emit_result(result, request, log)
    spark.stop()
    return 0 if result.ok else 1
