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
import socket
import sys
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core.errors import CorruptStateError
from airflow_provider_ctas.core.protocol import RESULT_LINE_PREFIX, PhaseRequest, PhaseResult, error_info
from airflow_provider_ctas.driver.phases import record_progress, run_phases
from airflow_provider_ctas.spark.engine import CONNECT_MODE_VARIABLES
from airflow_provider_ctas.spark.errors import classify

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
    _check_numpy_without_importing_it()
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
    _stop(spark)
    return 0 if result.ok else 1


def _check_numpy_without_importing_it() -> None:
    """pyspark asks of every argument of every JVM call whether it is a NumPy value, through
    ``pyspark.testing.utils``, whose import loads pandas and pyarrow: 1.2-2.6 s before the first
    JVM call of any driver where they are installed (measured; the session starts 1.4 s sooner
    without it), for a check that cannot succeed until NumPy is imported. This driver's converters
    ask ``sys.modules`` instead; converting stays pyspark's."""
    from py4j import protocol
    from pyspark.sql import types

    if not (hasattr(types, "NumpyScalarConverter") and hasattr(types, "NumpyArrayConverter")):
        return  # a pyspark without them (the cluster's own may differ): its own check stays

    def numpy() -> Any:
        return sys.modules.get("numpy")

    class ScalarConverter(types.NumpyScalarConverter):
        def can_convert(self, obj: Any) -> bool:
            return (module := numpy()) is not None and isinstance(obj, module.generic)

    class ArrayConverter(types.NumpyArrayConverter):
        def can_convert(self, obj: Any) -> bool:
            return (module := numpy()) is not None and isinstance(obj, module.ndarray) and obj.ndim == 1

    lighter = {types.NumpyScalarConverter: ScalarConverter, types.NumpyArrayConverter: ArrayConverter}
    for i, converter in enumerate(protocol.INPUT_CONVERTER):
        if type(converter) in lighter:
            protocol.INPUT_CONVERTER[i] = lighter[type(converter)]()


def _stop(spark: SparkSession) -> None:
    """``spark.stop()`` without waiting for the accumulator server's poll loop to notice it should
    end: up to 0.5 s (0.36-0.46 s measured) at the end of every run, spent after the result is
    written. No job runs any more, the server's thread is a daemon and the process exits right
    after; only a Unix-socket server, which leaves a socket file behind, is stopped the usual way.
    """
    context = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is not None and server.address_family in (socket.AF_INET, socket.AF_INET6):
        context._accumulatorServer = None  # type: ignore[assignment]
    spark.stop()
