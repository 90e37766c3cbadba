"""The PySpark application that spark-submit runs for the phases of a transaction.

One submission runs begin, prepare and commit (``phases.py``) back to back (the same single Spark
process a plain CREATE TABLE AS SELECT needs), and publishes only when the task that submitted it
answers commit (``coordinator_link.py``); a separate submission runs abort when a failure left
something behind. When a phase fails before the publish, this try's staging is removed right here, so the
common failure (bad SQL, a failed job) needs no second Spark process.
"""

from __future__ import annotations

import contextlib
import os
import sys

from airflow_provider_ctas.core.errors import CorruptStateError
from airflow_provider_ctas.driver.phases import record_progress, run_phases
from airflow_provider_ctas.spark.engine import CONNECT_MODE_VARIABLES
from airflow_provider_ctas.spark.errors import classify
from airflow_provider_ctas.spark.protocol import RESULT_LINE_PREFIX, PhaseRequest, PhaseResult, error_info


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


def _request_path(argument: str) -> str:
    if os.path.exists(argument):
        return argument
    from pyspark import SparkFiles

    return SparkFiles.get(os.path.basename(argument))  # cluster mode: shipped with --files


def _emit_result(result: PhaseResult, request: PhaseRequest | None, log: ConsoleReporter) -> None:
    text = result.to_json()
    if request is not None:
        record_progress(result, request)
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
    # A process that once made a Spark Connect session keeps SPARK_CONNECT_MODE_ENABLED set (pyspark
    # does) and its children inherit it; this driver is a classic session whatever the parent used.
    for variable in CONNECT_MODE_VARIABLES:
        os.environ.pop(variable, None)
    spark = SparkSession.builder.enableHiveSupport().getOrCreate()
    spark.conf.set("spark.sql.parser.escapedStringLiterals", "false")
    request: PhaseRequest | None = None
    try:
        with open(_request_path(args[0])) as handle:
            request = PhaseRequest.from_json(handle.read())
        if "commit" in request.phases and request.coordinator is None:
            raise CorruptStateError("a request to publish must name the task that decides the commit")
        result = run_phases(spark, request, log)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a coded result the task can read
        error = classify(exc)
        result = PhaseResult(error=error_info(error.code, str(error), "load"))
        log.warning(f"cannot run: {error}")
    _emit_result(result, request, log)
    spark.stop()
    return 0 if result.ok else 1
