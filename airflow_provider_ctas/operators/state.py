"""Where the operator keeps its transaction between tries and callbacks, and how provider errors
become Airflow's: retryable ones retry, the rest fail the task at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from airflow.providers.common.compat.sdk import AirflowException

from airflow_provider_ctas.catalogs import load_two_phase_table
from airflow_provider_ctas.core.details import received
from airflow_provider_ctas.core.errors import AuditFailedError, CtasError, error_from_code
from airflow_provider_ctas.core.protocol import PhaseResult, Reached
from airflow_provider_ctas.core.transaction import Outcome, TwoPhaseTable, TxnState
from airflow_provider_ctas.operators.exceptions import airflow_exception

if TYPE_CHECKING:
    from airflow.sdk import Context

XCOM_KEY = "ctas_transaction"


def durable_table(context: Context) -> TwoPhaseTable | None:
    """The transaction as the task state store kept it across tries (None on a first try)."""
    store = context.get("task_state_store")
    if store is None:
        return None
    stored = store.get(XCOM_KEY)
    return None if stored is None else load_two_phase_table(stored)


def xcom_table(context: Context) -> TwoPhaseTable | None:
    ti = context["ti"]
    value = ti.xcom_pull(task_ids=ti.task_id, key=XCOM_KEY, map_indexes=ti.map_index)
    return None if value is None else load_two_phase_table(value)


class Log(Protocol):
    def info(self, msg: Any, /, *args: Any, **kw: Any) -> Any: ...
    def warning(self, msg: Any, /, *args: Any, **kw: Any) -> Any: ...


def persist(context: Context, table: TwoPhaseTable, log: Log) -> bool:
    """Durable copy first (the next try needs it), then XCom (for the UI and downstream tasks).
    False when a newer try of the task instance has begun: a superseded try writes nothing that a
    reader of the task instance trusts.

    Either write may be refused where Airflow does not allow it: the state store in
    ``on_retry_callback`` (the try's task instance id is already retired; measured on 3.3.2)
    and outside a worker, XCom in the DAG processor. The catalog markers remain the ground
    truth, so a refused write only costs visibility. A newer try is looked for in both stores:
    the state store may refuse a superseded try's read, and XCom is cleared when a try starts.
    """
    data = table.to_dict()
    store = context.get("task_state_store")
    if store is not None:
        try:
            if _superseded(store.get(XCOM_KEY), table, log):
                return False
            store.set(XCOM_KEY, data)
        except Exception as exc:  # noqa: BLE001 - best effort: the state also lives in the other store
            log.info("The task state store refused the write here (%s)", exc)
    ti = context["ti"]
    try:
        if _superseded(ti.xcom_pull(task_ids=ti.task_id, key=XCOM_KEY, map_indexes=ti.map_index), table, log):
            return False
        ti.xcom_push(key=XCOM_KEY, value=data)
    except Exception as exc:  # noqa: BLE001 - best effort: the state also lives in the other store
        log.info("Could not push XCom %s here (%s)", XCOM_KEY, exc)
    return True


def _superseded(current: object, table: TwoPhaseTable, log: Log) -> bool:
    newer = current.get("try_number") if isinstance(current, dict) else None
    if isinstance(newer, int) and newer > table.try_number:
        log.warning(
            "Not recording try %s: try %s of this task has begun since (this try is fenced off)",
            table.try_number,
            newer,
        )
        return True
    return False


def apply_result(table: TwoPhaseTable, result: PhaseResult, now: str, log: Log) -> None:
    """Turn what the Spark run reported into the transaction's transitions (the caller persists them)."""
    details = received(result.details)
    details["phases"] = [vars(report) for report in result.phases]
    if result.error:
        details["error"] = result.error
    if result.reached in (Reached.PREPARED, Reached.COMMITTED) and table.state is TxnState.BEGUN:
        prepared_at = result.details.get("prepared_at")
        table.mark_prepared(table.try_number, prepared_at if isinstance(prepared_at, str) else now)
    if result.ok and result.reached is Reached.PREPARED and "held" in result.details:
        table.details.update(details)  # a publish group's member: its publisher publishes
    elif result.ok:
        outcome = Outcome(result.outcome) if result.outcome else Outcome.PUBLISHED
        table.commit(table.try_number, now, outcome, details)
    elif result.reached == Reached.COMMITTED:
        log.warning("The target was published, then the Spark run failed: %s", result.error)
        table.commit(table.try_number, now, Outcome.PUBLISHED, details)
    elif result.cleaned_up or result.reached == Reached.ABORTED:
        table.abort(table.try_number, now, {**details, "aborted_by": "spark driver"})
    else:
        table.details.update(details)


def run_failure(error: Mapping[str, str], *, retry_on_failed_checks: bool) -> CtasError:
    """The error a failed Spark run reported; a failed audit retries only when the task asks for it."""
    failure = error_from_code(error.get("code", "SPARK_ERROR"), error.get("message", ""))
    if isinstance(failure, AuditFailedError) and retry_on_failed_checks:
        failure.retryable = True
    return failure


def refuse_without_begin(cause: BaseException | None) -> NoReturn:
    """``execute`` without a completed begin for this try: Airflow swallows a callback's error, so
    it surfaces here, and no Spark work starts."""
    if isinstance(cause, CtasError):
        raise_for_airflow(cause)
    raise AirflowException(
        "begin did not complete for this try"
        + (
            f" ({type(cause).__name__}: {cause})"
            if cause
            else " (on_execute_callback did not run: were the operator's lifecycle callbacks replaced after "
            "it was built? pass your own as on_*_callback arguments, which run after the operator's)"
        )
        + "; refusing to start any Spark work"
    )


def raise_for_airflow(error: CtasError) -> NoReturn:
    """Raise the error's Airflow exception (``operators.exceptions``): retried or not by its family."""
    raise airflow_exception(error) from error


def summary(table: TwoPhaseTable) -> dict[str, Any]:
    """What ``execute`` returns (the task's return value XCom)."""
    return {
        "target": table.target.qualified,
        "outcome": table.outcome.value if table.outcome else None,
        "row_count": table.details.get("row_count"),
        "spark_application_id": (table.details.get("spark_application") or {}).get("id"),
        "txn_id": table.txn_id,
        "try_number": table.try_number,
        "state": table.state.value,
    }
