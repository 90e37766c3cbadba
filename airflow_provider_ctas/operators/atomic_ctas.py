"""``AtomicCtasOperator``: CREATE TABLE AS SELECT on Spark that publishes all or nothing.

The task's lifecycle is the job-status hook of FLIP-218/305, adapted to what Airflow 3.3 really
does (docs/design.md):

    on_execute_callback   begin     record try N as the fence in the task state store and XCom
    execute               run       one spark-submit (or one Spark Connect session): catalog begin,
                                    prepare (write staging), commit (publish); the publish happens
                                    before the task reports success, and a failed publish fails it
    on_success_callback   finalize  idempotent check that the commit is recorded
    on_failure_callback   abort     remove what the try left (skipped if the driver already did)
    on_retry_callback     abort
    on_kill               kill the Spark application (interrupt the Connect session), then abort

Airflow swallows exceptions from callbacks, so ``execute`` refuses to start Spark work unless
begin completed for this very try.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pendulum
from airflow.providers.common.compat.assets import Asset, AssetAlias
from airflow.providers.common.compat.sdk import AirflowException, BaseOperator
from airflow.providers.common.compat.sdk import conf as conf_

from airflow_provider_ctas.catalogs import create_two_phase_table, strategy_for
from airflow_provider_ctas.catalogs.query import validate_query
from airflow_provider_ctas.core.checks import PLACEHOLDERS, Check, validate_checks
from airflow_provider_ctas.core.errors import CtasError, InvalidInputError
from airflow_provider_ctas.core.identifiers import validate_table_properties
from airflow_provider_ctas.core.modes import parse_mode
from airflow_provider_ctas.core.partitioning import validate_partition_by
from airflow_provider_ctas.core.transaction import (
    Outcome,
    TransactionKey,
    TwoPhaseTable,
    TxnState,
)
from airflow_provider_ctas.operators.assets import outlet_for, record_publish_event
from airflow_provider_ctas.operators.lineage import CtasLineageMixin
from airflow_provider_ctas.operators.links import SparkApplicationLink
from airflow_provider_ctas.operators.state import (
    durable_table,
    persist,
    raise_for_airflow,
    run_failure,
    summary,
    xcom_table,
)
from airflow_provider_ctas.runners import Runner, is_connect, runner_for
from airflow_provider_ctas.runners.spark_submit import faults_from_environment, validate_submit_options
from airflow_provider_ctas.spark.protocol import ABORT_PHASES, PhaseRequest, PhaseResult, Reached, run_phases_for

if TYPE_CHECKING:
    from airflow.sdk import Context

"""XCom key (and task state store key) of the serialized two-phase table."""

Callback = Callable[..., Any]


def _callbacks(value: Callback | Sequence[Callback] | None) -> list[Callback]:
    if value is None:
        return []
    if callable(value):
        return [value]
    return list(value)


def _now() -> str:
    return pendulum.now("UTC").isoformat()


def _is_templated(value: object) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _has_templates(mapping: object) -> bool:
    """A dict with a templated key or value: checked once rendered, not when the DAG is parsed."""
    return isinstance(mapping, Mapping) and any(_is_templated(k) or _is_templated(v) for k, v in mapping.items())


def _rendered_submit_options(value: object) -> dict[str, Any]:
    """spark_submit_options once templates rendered: a dict (values may have been templates)."""
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInputError(
            f"spark_submit_options must render to a dict, got {type(value).__name__}: template its values, "
            "or render the whole dict with the DAG's render_template_as_native_obj=True"
        )
    return validate_submit_options(value)


# Airflow runs a shallow copy of the operator (``prepare_for_execution``), so lifecycle callbacks
# must act on the instance in the context, not on the one they were bound to at DAG parse time.
def _operator(context: Context) -> AtomicCtasOperator:
    task = context["task"]
    if not isinstance(task, AtomicCtasOperator):
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


class AtomicCtasOperator(CtasLineageMixin, BaseOperator):
    """Create (or replace) a table from a Spark SQL query, atomically.

    The target appears only when the task succeeds, complete, in one metastore operation; a
    failed, killed or crashed try leaves no target and no staging behind (at the latest after
    the next try or a garbage-collection pass); retries need no manual clean-up.

    :param sql: the SELECT (or WITH/VALUES query) whose result becomes the table; inline or a
        ``.sql`` file; templated. Trailing semicolons are ignored. It is run as a subquery, so
        DDL or several statements are rejected.
    :param target_table: ``database.table`` (or ``spark_catalog.database.table``) for file formats
        and Delta; ``catalog.database.table`` for Iceberg (a ``SparkCatalog`` configured in ``conf``);
        templated.
    :param mode: ``create`` (fail if the table exists and this task did not publish it),
        ``create_if_not_exists`` (succeed without running if it exists), ``replace``, or
        ``overwrite_partitions`` (replace the partitions the query produces inside a partitioned
        table, creating it on first use; each partition switches atomically, others stay).
    :param partition_by: partition columns; for Iceberg tables also partition transforms
        (``days(ts)``, ``months(ts)``, ``years(ts)``, ``hours(ts)``, ``bucket(16, id)``,
        ``truncate(4, name)``); templated.
    :param table_format: a file format of Spark's session catalog (parquet, orc, json, csv, text,
        avro), ``iceberg`` or ``delta``; each publishes by its own mechanism (docs: table formats).
    :param table_properties: extra table properties; templated.
    :param allow_swap: let ``replace`` change the table's shape (columns, format, partitioning) by
        swapping two tables; readers may then find the table missing or empty for a moment between
        two renames. Without it, such a replace fails before any Spark job runs; a replace that
        keeps the shape never has that window.
    :param superseded_retention: how long the data of a replaced version (a flipped-away table
        location, a switched partition) stays on storage after the publish, so that readers whose
        session listed its files before the switch keep reading it instead of failing; the next
        publish over the same data, or GC, deletes it afterwards. ``0`` deletes it at once.
    :param checks: assertions on the staged version, evaluated after it is written and before it is
        published (``airflow_provider_ctas.checks``: ``RowCount``, ``NotNull``, ``Unique``,
        ``AcceptedValues``, ``RowCountChange``, ``SqlCheck``, or their dict form); templated. A
        failed check publishes nothing and fails the task with ``AUDIT_FAILED``.
    :param retry_on_failed_checks: retry the task when a check fails (default: fail at once, since
        the same data fails the same checks again; set it when the data may still be arriving).
    :param conn_id: the apache-spark provider's connection: a ``spark`` connection (spark-submit:
        master, deploy mode, ...) or a ``spark_connect`` connection (the phases run over Spark
        Connect from the task process; no spark-submit, no JVM on the worker).
    :param conf: Spark configuration for the application (templated), e.g. the metastore.
    :param spark_submit_options: further ``SparkSubmitHook`` arguments (``driver_memory``,
        ``jars``, ``deploy_mode``, ``properties_file``, ...).
    :param asset_events: announce each publish as an Airflow asset event for the table's asset
        ``hive://<metastore>/<database>/<table>`` (``hive://embedded/...`` on Spark's embedded
        metastore), with the row count, transaction, try, publish mechanism and partitions in its
        ``extra``; ``overwrite_partitions`` attaches the published partitions as partition keys.
        Emitted only when this try published or a retry found its own earlier publish.
    :param openlineage_inject_parent_job_info: pass this task as the OpenLineage parent job to
        Spark's own OpenLineage listener, as ``SparkSubmitOperator`` does (default from
        ``[openlineage] spark_inject_parent_job_info``).
    """

    template_fields: Sequence[str] = (
        "sql",
        "target_table",
        "mode",
        "partition_by",
        "table_properties",
        "conn_id",
        "conf",
        "spark_submit_options",
        "checks",
    )
    template_ext: Sequence[str] = (".sql", ".hql")
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql", "table_properties": "json", "conf": "json"}
    ui_color = "#e4f0e8"
    operator_extra_links = (SparkApplicationLink(),)

    def __init__(
        self,
        *,
        sql: str,
        target_table: str,
        mode: str = "create",
        partition_by: Sequence[str] | str | None = None,
        table_format: str = "parquet",
        table_properties: Mapping[str, Any] | str | None = None,
        allow_swap: bool = False,
        superseded_retention: datetime.timedelta | float = datetime.timedelta(hours=1),
        checks: Sequence[Check | Mapping[str, Any]] | None = None,
        retry_on_failed_checks: bool = False,
        conn_id: str = "spark_default",
        conf: Mapping[str, Any] | None = None,
        spark_submit_options: Mapping[str, Any] | str | None = None,
        asset_events: bool = True,
        openlineage_inject_parent_job_info: bool | None = None,
        on_execute_callback: Callback | Sequence[Callback] | None = None,
        on_success_callback: Callback | Sequence[Callback] | None = None,
        on_failure_callback: Callback | Sequence[Callback] | None = None,
        on_retry_callback: Callback | Sequence[Callback] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            on_execute_callback=[ctas_begin, *_callbacks(on_execute_callback)],
            on_success_callback=[ctas_finalize, *_callbacks(on_success_callback)],
            on_failure_callback=[ctas_abort, *_callbacks(on_failure_callback)],
            on_retry_callback=[ctas_abort, *_callbacks(on_retry_callback)],
            **kwargs,
        )
        self.sql = sql
        self.target_table = target_table
        # The strategy serving this format checks what it can before any template renders; templated
        # values are checked once rendered, in begin, before any Spark work.
        strategy = strategy_for(table_format)
        strategy.check_options("create" if _is_templated(mode) else mode, table_format, superseded_retention)
        self.mode = mode
        self.partition_by = (
            [partition_by] if isinstance(partition_by, str) and not _is_templated(partition_by) else partition_by
        )
        self.table_format = table_format.lower()
        self.table_properties = table_properties
        self.allow_swap = allow_swap
        self.superseded_retention = superseded_retention
        self.checks = list(checks or [])
        self.retry_on_failed_checks = retry_on_failed_checks
        self.conn_id = conn_id
        self.conf = conf
        self.spark_submit_options: Mapping[str, Any] | str = (
            spark_submit_options
            if isinstance(spark_submit_options, str) and _is_templated(spark_submit_options)
            else _rendered_submit_options(spark_submit_options)
        )
        self.openlineage_inject_parent_job_info = (
            conf_.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False)
            if openlineage_inject_parent_job_info is None
            else openlineage_inject_parent_job_info
        )
        # Fail at DAG parse time for what is already known; templated values are checked in begin.
        if not _is_templated(sql) and not str(sql).endswith(tuple(self.template_ext)):
            validate_query(sql)
        target = None if _is_templated(target_table) else strategy.validate_target(target_table)
        if not _is_templated(partition_by):
            validate_partition_by(self.partition_by)
            if not _is_templated(mode):
                parse_mode(mode, partition_by=self.partition_by or ())
        if not _is_templated(table_properties) and not _has_templates(table_properties):
            validate_table_properties(table_properties)
        validate_checks(self.checks)  # templated SQL is checked again, rendered, before any Spark work
        if self.checks and not strategy.audits:
            raise InvalidInputError(f"checks are not supported for {table_format!r} tables yet; remove checks=")
        self.asset_events = asset_events
        self._table_outlet: Asset | AssetAlias | None = None
        if asset_events:
            parse_time_namespace = (
                None
                if any(_is_templated(v) for v in (target_table, mode, conf)) or _has_templates(conf)
                else strategy.lineage_namespace(conf, None)
            )
            self._table_outlet = outlet_for(
                namespace=parse_time_namespace,
                target=target,
                mode=mode,
                alias_name=self._alias_name,
            )
            if self._table_outlet not in self.outlets:  # BaseOperator keeps outlets as a list
                self.outlets.append(self._table_outlet)
        self._checks: tuple[Check, ...] = ()
        self._txn: TwoPhaseTable | None = None
        self._begin_error: BaseException | None = None
        self._runner: Runner | None = None
        self._context: Context | None = None
        self._abort_started = False
        self._superseded = False
        # Set once a newer try of this task instance has begun: this one then records nothing more.

    # -- helpers -------------------------------------------------------------------------------

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        """Checks' SQL names the audit views as ``{{ staged }}``, ``{{ published }}``, ``{{ result }}``."""
        super().render_template_fields({**context, **PLACEHOLDERS}, jinja_env)  # type: ignore[typeddict-item]

    def _new_runner(self, context: Context | None = None) -> Runner:
        conf = dict(self.conf or {})
        if context is not None and self.openlineage_inject_parent_job_info and not is_connect(self.conn_id):
            # Imported here: it loads the OpenLineage listener (~1 s), a cost every DAG parse would pay.
            from airflow.providers.common.compat.openlineage.utils.spark import (
                inject_parent_job_information_into_spark_properties,
            )

            conf = inject_parent_job_information_into_spark_properties(conf, context)
        options = _rendered_submit_options(self.spark_submit_options)
        return runner_for(self.conn_id, conf=conf, submit_options=options, log=self.log)

    def _table_for(self, context: Context) -> TwoPhaseTable:
        ti = context["ti"]
        map_index = -1 if ti.map_index is None else ti.map_index
        key = TransactionKey(dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=map_index)
        return create_two_phase_table(
            key=key,
            conn_id=self.conn_id,
            target=self.target_table,
            mode=self.mode,
            table_format=self.table_format,
            partition_by=[self.partition_by] if isinstance(self.partition_by, str) else self.partition_by,
            table_properties=self.table_properties,  # type: ignore[arg-type]
            allow_swap=self.allow_swap,
            superseded_retention=self.superseded_retention,
        )

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
            self.spark_submit_options = _rendered_submit_options(self.spark_submit_options)
            prior = durable_table(context)
            if prior is not None:
                table.continue_from(prior)
            table.begin(context["ti"].try_number, _now())
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
            cause = self._begin_error
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
        return table

    # -- execute -------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        table = self._begun_table(context)
        self._context = context
        try:
            runner = self._new_runner(context)
        except CtasError as exc:
            raise_for_airflow(exc)
            raise
        self._runner = runner
        faults = faults_from_environment()
        checks = [check.to_dict() for check in self._checks]
        request = PhaseRequest(
            phases=run_phases_for(checks), table=table.to_dict(), sql=self.sql, faults=faults, checks=checks
        )
        started = time.monotonic()
        name = f"airflow-ctas {table.target} try {table.try_number}"
        try:
            result = runner.run(request, name=name)
        except CtasError as exc:
            raise_for_airflow(exc)
            raise
        self._apply(context, table, result)
        if not result.ok and table.state is not TxnState.COMMITTED:
            raise_for_airflow(run_failure(result.error or {}, retry_on_failed_checks=self.retry_on_failed_checks))
        self.log.info(
            "run: %s %s in %.2fs (%s rows; Spark application %s)",
            table.outcome,
            table.target,
            time.monotonic() - started,
            table.details.get("row_count", "unknown"),
            (table.details.get("spark_application") or {}).get("id", "unknown"),
        )
        self._announce(context, table)
        return summary(table)

    @property
    def _alias_name(self) -> str:
        return f"airflow-ctas:{self.dag_id}.{self.task_id}"

    def _announce(self, context: Context, table: TwoPhaseTable) -> None:
        outlet = self._table_outlet
        if outlet is None:
            return
        if isinstance(outlet, Asset) and context["ti"].map_index not in (None, -1):
            # A mapped task's outlets are not known when the DAG is parsed (it is built from
            # expand()'s values at run time), so its table's asset is not registered: announce it
            # through an alias, which Airflow resolves when the event arrives.
            mine = [o for o in self.outlets if o != outlet]
            outlet = AssetAlias(name=self._alias_name)
            self.outlets = [*mine, outlet]
        namespace = strategy_for(self.table_format).lineage_namespace(self.conf, table.details)
        if record_publish_event(context, outlet, namespace, table):
            self.log.info("asset event for %s (outlet %s)", table.target, outlet)

    def _apply(self, context: Context, table: TwoPhaseTable, result: PhaseResult) -> None:
        """Turn what the Spark run reported into lifecycle transitions, then persist them."""
        now = _now()
        details = {**result.details, "phases": [vars(report) for report in result.phases]}
        if result.error:
            details["error"] = result.error
        if result.reached in (Reached.PREPARED, Reached.COMMITTED) and table.state is TxnState.BEGUN:
            prepared_at = result.details.get("prepared_at")
            table.mark_prepared(table.try_number, prepared_at if isinstance(prepared_at, str) else now)
        if result.ok:
            outcome = Outcome(result.outcome) if result.outcome else Outcome.PUBLISHED
            table.commit(table.try_number, now, outcome, details)
        elif result.reached == Reached.COMMITTED:
            self.log.warning("The target was published, then the Spark run failed: %s", result.error)
            table.commit(table.try_number, now, Outcome.PUBLISHED, details)
        elif result.cleaned_up or result.reached == Reached.ABORTED:
            table.abort(table.try_number, now, {**details, "aborted_by": "spark driver"})
        else:
            table.details.update(details)
        self._persist(context, table)

    # -- finalize ------------------------------------------------------------------------------

    def _finalize_callback(self, context: Context) -> None:
        table = self._txn or xcom_table(context)
        if table is None:
            self.log.error("finalize: no transaction found for this task instance")
            return
        if table.state is not TxnState.COMMITTED:
            self.log.error("finalize: the task succeeded but transaction is %s: nothing was published", table.state)
            return
        if table.finalize(table.try_number, _now()):
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
            table.abort(table.try_number, _now(), {"aborted_by": "abort run", **result.details})
            self.log.info("abort: ok in %.2fs", time.monotonic() - started)
        else:
            self.log.error("abort: failed (%s); the next try or a GC pass will clean up this transaction", result.error)
        self._persist(context, table)

    def on_kill(self) -> None:
        if self._runner is not None:
            self.log.info("on_kill: killing the Spark application")
            self._runner.kill()
        if self._txn is not None and self._context is not None:
            self._abort(self._context, self._txn, detach=True)
