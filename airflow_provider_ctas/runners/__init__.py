"""How the Airflow side starts Spark work for a phase: a runner per kind of connection, picked in
one place (``runner_for``) as the apache-spark provider picks its hook from the connection type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_ctas.core.errors import InvalidInputError

if TYPE_CHECKING:
    from airflow_provider_ctas.core.protocol import PhaseRequest, PhaseResult


class Logger(Protocol):
    """The task's logger (Airflow's structlog logger or a ``logging.Logger``)."""

    def debug(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: Any, *args: Any, **kw: Any) -> Any: ...


class Runner(Protocol):
    def run(self, request: PhaseRequest, *, name: str, detach: bool = False) -> PhaseResult:
        """Run the request's phases; a run that publishes does so only on this task's word."""
        ...

    def kill(self) -> None:
        """Stop what ``run`` started (``on_kill``)."""
        ...


def is_connect(conn_id: str) -> bool:
    """Whether ``conn_id`` is a ``spark_connect`` connection (else spark-submit's ``spark``)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return bool(SparkConnectHook.get_connection(conn_id).conn_type == SparkConnectHook.conn_type)


def runner_for(
    conn_id: str, *, conf: Mapping[str, Any] | None, submit_options: Mapping[str, Any] | None, log: Logger
) -> Runner:
    """A ``spark_connect`` connection runs the phases in this process over Spark Connect; any other
    runs them in a driver started by spark-submit (the apache-spark provider's ``spark`` connection)."""
    from airflow_provider_ctas.runners.spark_connect import SparkConnectRunner
    from airflow_provider_ctas.runners.spark_submit import SparkSubmitRunner

    if is_connect(conn_id):
        if submit_options:
            raise InvalidInputError(
                f"connection {conn_id!r} is a Spark Connect connection; spark_submit_options do not apply"
            )
        return SparkConnectRunner(conn_id=conn_id, conf=conf, log=log)
    return SparkSubmitRunner(conn_id=conn_id, conf=conf, submit_options=submit_options, log=log)
