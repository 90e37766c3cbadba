"""The task's lifecycle as FLIP-218's job-status hook: begin in ``on_execute_callback``, finalize in
``on_success_callback``, abort in ``on_failure_callback`` / ``on_retry_callback`` and ``on_kill``.
``execute`` (the operator) runs the Spark phases in between; this part never starts Spark work
except an abort's.

Airflow swallows exceptions from callbacks, so begin keeps its error for ``execute``, which refuses
to start Spark work unless begin completed for this very try.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pendulum

from airflow_provider_ctas.catalogs.query import validate_query
from airflow_provider_ctas.core.checks import Check, validate_checks
from airflow_provider_ctas.core.details import received
from airflow_provider_ctas.core.protocol import ABORT_PHASES, PhaseRequest
from airflow_provider_ctas.core.transaction import TwoPhaseTable, TxnState
from airflow_provider_ctas.operators.arguments import rendered_submit_options
from airflow_provider_ctas.operators.state import durable_table, persist, refuse_without_begin, xcom_table
from airflow_provider_ctas.runners import Runner
from airflow_provider_ctas.runners.spark_submit import faults_from_environment

if TYPE_CHECKING:
    from airflow.sdk import Context


def now() -> str:
    return pendulum.now("UTC").isoformat()


# Airflow runs a shallow copy of the operator (``prepare_for_execution``), so lifecycle callbacks
# must act on the instance in the context, not on the one they were bound to at DAG parse time.
def _operator(context: Context) -> CtasLifecycle:
    task = context["task"]
    if not isinstance(task, CtasLifecycle):
        raise TypeError(f"lifecycle callback ran for {type(task).__name__}, not AtomicCtasOperator")
    return task


def ctas_begin(context: Context) -> None:
    """on_execute_callback: begin the transaction for this try."""
    _operator(context)._begin_callback(context)


def ctas_finalize(context: Context) -> None:
    """on_success_callback: confirm the commit (idempotent)."""
    _operator(context)._finalize_callback(context)


def ctas_abort(context: Context) -> None:
    """on_failure_callback / on_retry_callback: abort what this try left behind."""
    _operator(context)._abort_callback(context)


class CtasLifecycle:
    """Begin, finalize and abort of one try, for ``AtomicCtasOperator``: state that lives between
    callbacks of a try lives here, and only for that try."""

    log: Any  # BaseOperator's logger
    sql: str
    mode: str
    checks: list[Any]
    spark_submit_options: Mapping[str, Any] | str
    _checks: tuple[Check, ...] = ()
    _txn: TwoPhaseTable | None = None
    _begin_error: BaseException | None = None
    _runner: Runner | None = None
    _context: Context | None = None
    _abort_started = False
    _superseded = False
    """Set once a newer try of this task instance has begun: this one then records nothing more."""

    # The operator's: the table this task instance's try publishes, and the runner its conn_id names.
    _table_for: Callable[[Context], TwoPhaseTable]
    _new_runner: Callable[..., Runner]

    def _persist(self, context: Context, table: TwoPhaseTable) -> None:
        if not persist(context, table, self.log):
            self._superseded = True

    # -- begin ---------------------------------------------------------------------------------

    def _begin_callback(self, context: Context) -> None:
        started = time.monotonic()
        self._txn, self._begin_error, self._context = None, None, context
        try:
            validate_query(self.sql)
            table = self._table_for(context)
            self._checks = validate_checks(self.checks)
            self.spark_submit_options = rendered_submit_options(self.spark_submit_options)
            prior = durable_table(context)
            if prior is not None:
                table.continue_from(prior)
            table.begin(context["ti"].try_number, now())
            self._persist(context, table)
        except BaseException as exc:
            self._begin_error = exc
            self.log.error("begin: failed: %s", exc)
            raise
        self._txn = table
        self.log.info(
            "begin: ok in %.2fs; transaction %s, try %s, target %s (mode %s)",
            time.monotonic() - started,
            table.txn_id,
            table.try_number,
            table.target,
            self.mode,
        )

    def _begun_table(self, context: Context) -> TwoPhaseTable:
        table = self._txn
        if table is None or table.state is not TxnState.BEGUN or table.try_number != context["ti"].try_number:
            refuse_without_begin(self._begin_error)
        return table

    # -- finalize ------------------------------------------------------------------------------

    def _finalize_callback(self, context: Context) -> None:
        table = self._txn or xcom_table(context)
        if table is None:
            self.log.error("finalize: no transaction found for this task instance")
            return
        if table.state is TxnState.PREPARED and "held" in table.details:
            self.log.info("finalize: %s is staged and held for its publish group's publisher", table.target)
            return
        if table.state is not TxnState.COMMITTED:
            self.log.error("finalize: the task succeeded but transaction is %s: nothing was published", table.state)
            return
        if table.finalize(table.try_number, now()):
            self._persist(context, table)
        self.log.info("finalize: ok; %s is published (%s)", table.target, table.outcome)

    # -- abort ---------------------------------------------------------------------------------

    def _abort_callback(self, context: Context) -> None:
        """Abort acts only on the try this process ran, never on what the stored state names.

        A callback delivered elsewhere (the DAG processor after a lost worker, possibly late and more
        than once) runs on a fresh operator while a newer try may already be writing: the stored
        transaction may be that newer try's. It starts no Spark work: the failed try's driver removes
        its own staging once its task is gone (the commit handshake), and the next try or a GC pass
        removes anything a crash left.
        """
        table = self._txn
        failed_try = context["ti"].try_number
        if table is None or table.try_number != failed_try:
            self.log.info(
                "abort: try %s did not run in this process; its driver removes its own staging when its task is "
                "gone, and the next try or a GC pass removes what is left. Nothing to do here.",
                failed_try,
            )
            return
        # Detached: Airflow's supervisor signals the task's process group [core] task_success_overtime
        # after the task failed; an abort spark-submit in its own session finishes its clean-up anyway.
        self._abort(context, table, detach=True)

    def _abort(self, context: Context, table: TwoPhaseTable, *, detach: bool) -> None:
        if table.state in (TxnState.COMMITTED, TxnState.ABORTED):
            self.log.info("abort: nothing to do, the transaction is %s", table.state)
            return
        if self._abort_started:
            self.log.info("abort: already started by on_kill")
            return
        self._abort_started = True
        started = time.monotonic()
        result = self._new_runner().run(
            PhaseRequest(phases=ABORT_PHASES, table=table.to_dict(), faults=faults_from_environment()),
            name=f"airflow-ctas abort {table.target} try {table.try_number}",
            detach=detach,
        )
        if result.ok:
            table.abort(table.try_number, now(), {"aborted_by": "abort run", **received(result.details)})
            self.log.info("abort: ok in %.2fs", time.monotonic() - started)
        else:
            self.log.error("abort: failed (%s); the next try or a GC pass will clean up this transaction", result.error)
        self._persist(context, table)

    def on_kill(self) -> None:
        if self._runner is not None:
            self._runner.kill()
        if self._txn is not None and self._context is not None:
            self._abort(self._context, self._txn, detach=True)
