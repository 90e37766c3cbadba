"""Runs phase requests over Spark Connect (``spark_connect`` connections): no spark-submit, no JVM here.

The phases are the same code the spark-submit application runs, executed in the task process
against a remote session from the apache-spark provider's ``SparkConnectHook``.

Fencing: each try of a transaction runs in its own Connect session whose id is derived from the
transaction id and the try number. A try that was killed (SIGKILL, a lost worker) leaves its last
statement running on the server, where it could still write into staging that the next try is
cleaning up. So before it starts, a try reattaches to the sessions of the earlier tries and
interrupts whatever they still run; abort does the same for the try it aborts. ``on_kill``
interrupts this try's session.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

from airflow_provider_ctas.core.errors import CtasError, SparkJobError
from airflow_provider_ctas.core.protocol import ABORT_PHASES, PhaseRequest, PhaseResult, error_info
from airflow_provider_ctas.driver.phases import record_progress, run_phases
from airflow_provider_ctas.runners import Logger
from airflow_provider_ctas.spark.engine import CONNECT_MODE_VARIABLES
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


SESSION_NAMESPACE = uuid.UUID("0b6f1d8e-4a55-4c4e-9b1f-6a2f3c1d2e7a")
FENCE_TIMEOUT_SECONDS = 120.0


def session_id(txn_id: str, try_number: int) -> str:
    """The Connect session id of one try: any process can find it from the serialized transaction."""
    return str(uuid.uuid5(SESSION_NAMESPACE, f"{txn_id}/{try_number}"))


@contextlib.contextmanager
def connect_mode_confined() -> Iterator[None]:
    """Undo the environment pyspark sets for a Connect session (SPARK_CONNECT_MODE_ENABLED) once done.

    Left set, it turns every later classic session of this process, and of its children (a
    spark-submit driver, measured: CONNECT_URL_NOT_SET), into a Spark Connect one.
    """
    saved = {name: os.environ.get(name) for name in CONNECT_MODE_VARIABLES}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class TaskLogReporter:
    """Phase progress into the Airflow task log, with the same prefix the Spark driver uses."""

    def __init__(self, log: Logger) -> None:
        self._log = log

    def info(self, message: str) -> None:
        self._log.info("[airflow-ctas] %s", message)

    def warning(self, message: str) -> None:
        self._log.warning("[airflow-ctas] %s", message)


class SparkConnectRunner:
    def __init__(self, *, conn_id: str, conf: Mapping[str, Any] | None, log: Logger) -> None:
        self.conn_id = conn_id
        self.conf = {str(k): str(v) for k, v in (conf or {}).items()}
        self.log = log
        self._session: SparkSession | None = None

    def _connect(self, session: str | None = None) -> SparkSession:
        from pyspark.sql import SparkSession

        url = SparkConnectHook(conn_id=self.conn_id).get_connection_url()
        if session is not None:
            url = f"{url};session_id={session}"
        return SparkSession.builder.remote(url).create()

    def _fence(self, txn_id: str, tries: range) -> None:
        """Interrupt what earlier tries' sessions still run, and wait until nothing does."""
        for try_number in tries:
            try:
                spark = self._connect(session_id(txn_id, try_number))
            except Exception as exc:  # noqa: BLE001 - a closed session: nothing of it runs
                self.log.debug("try %s's session: %s", try_number, first_line(exc))
                continue
            try:
                deadline = time.monotonic() + FENCE_TIMEOUT_SECONDS
                while interrupted := spark.interruptAll():
                    self.log.warning(
                        "[airflow-ctas] interrupted %s operation(s) still running for try %s",
                        len(interrupted),
                        try_number,
                    )
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"try {try_number}'s operations did not stop")
                    time.sleep(1)
            except TimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - that session is gone or going; nothing of it runs
                self.log.debug("try %s's session: %s", try_number, first_line(exc))
            finally:
                spark.stop()

    def run(self, request: PhaseRequest, *, name: str, detach: bool = False) -> PhaseResult:
        """Run ``request`` over Spark Connect; never raises for a failed Spark run.

        ``detach`` has no meaning here (nothing runs in a child process); abort from ``on_kill``
        runs in this process before Airflow's grace period ends, and the next try or a GC pass
        finishes it otherwise.
        """
        with connect_mode_confined():
            return self._run(request, name=name)

    def _run(self, request: PhaseRequest, *, name: str) -> PhaseResult:
        txn_id, try_number = str(request.table.get("txn_id", "")), int(request.table.get("try_number", 0))
        try:
            if "prepare" in request.phases:
                self._fence(txn_id, range(1, try_number))
                spark = self._connect(session_id(txn_id, try_number))
            else:
                if request.phases == ABORT_PHASES:
                    self._fence(txn_id, range(1, try_number + 1))
                spark = self._connect()
        except Exception as exc:  # noqa: BLE001 - any failure to reach or run on the server is a coded result
            result = PhaseResult(error=error_info(SparkJobError.code, first_line(exc), "connect"))
            record_progress(result, request)
            return result
        self._session = spark
        try:
            with warnings.catch_warnings():  # deprecated in 4.0, still honoured: pin what our quoting assumes
                warnings.simplefilter("ignore")
                spark.conf.set("spark.sql.parser.escapedStringLiterals", "false")
            for key, value in self.conf.items():
                spark.conf.set(key, value)
            self.log.info("[airflow-ctas] %s over Spark Connect (session %s)", name, spark.client._session_id)
            result = run_phases(spark, request, TaskLogReporter(self.log))
        except CtasError as exc:  # e.g. the server's Spark is unsupported: keep its code (and retry decision)
            result = PhaseResult(error=error_info(exc.code, str(exc), "connect"))
        except Exception as exc:  # noqa: BLE001 - any failure to reach or run on the server is a coded result
            result = PhaseResult(error=error_info(SparkJobError.code, first_line(exc), "connect"))
        finally:
            self._session = None
            try:
                spark.stop()
            except Exception as exc:  # noqa: BLE001 - the session is closed either way
                self.log.debug("closing the Spark Connect session: %s", first_line(exc))
        record_progress(result, request)
        return result

    def kill(self) -> None:
        spark = self._session
        if spark is None:  # an execution_timeout reaches on_kill after run() has closed its session
            self.log.info("[airflow-ctas] on_kill: no Spark Connect session in progress here, nothing to interrupt")
            return
        interrupted = spark.interruptAll()
        self.log.info("[airflow-ctas] on_kill: interrupted %s Spark Connect operation(s)", len(interrupted))
