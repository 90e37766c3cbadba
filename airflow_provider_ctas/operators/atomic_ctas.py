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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.common.compat.assets import Asset, AssetAlias
from airflow.providers.common.compat.sdk import BaseOperator
from airflow.providers.common.compat.sdk import conf as conf_

from airflow_provider_ctas.catalogs import create_two_phase_table, strategy_for
from airflow_provider_ctas.core.checks import PLACEHOLDERS, Check
from airflow_provider_ctas.core.durable import digest_of
from airflow_provider_ctas.core.errors import CtasError
from airflow_provider_ctas.core.protocol import PhaseRequest, run_phases_for
from airflow_provider_ctas.core.transaction import (
    TransactionKey,
    TwoPhaseTable,
    TxnState,
)
from airflow_provider_ctas.operators.arguments import (
    Callback,
    callbacks,
    check_known_arguments,
    durable_flag,
    group_member,
    has_templates,
    is_templated,
    partition_list,
    rendered_submit_options,
)
from airflow_provider_ctas.operators.assets import outlet_for, record_publish_event
from airflow_provider_ctas.operators.lifecycle import CtasLifecycle, ctas_abort, ctas_begin, ctas_finalize, now
from airflow_provider_ctas.operators.lineage import CtasLineageMixin
from airflow_provider_ctas.operators.links import SparkApplicationLink
from airflow_provider_ctas.operators.state import (
    apply_result,
    raise_for_airflow,
    run_failure,
    summary,
)
from airflow_provider_ctas.runners import Runner, is_connect, runner_for
from airflow_provider_ctas.runners.spark_submit import faults_from_environment

if TYPE_CHECKING:
    from airflow.sdk import Context


class AtomicCtasOperator(CtasLifecycle, CtasLineageMixin, BaseOperator):
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
    :param comment: the table's comment; templated. None keeps the comment an existing table has.
    :param column_comments: comments of columns, by name (``{"id": "the order's id"}``); templated.
        A replace keeps the comments the table's remaining columns already have (set with
        ``ALTER TABLE ... ALTER COLUMN ... COMMENT`` or in a catalog UI); these change only the
        columns they name, which the query must produce.
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
        ``AcceptedValues``, ``ValueRange``, ``RowCountChange``, ``SqlCheck``, or their dict form);
        templated. A failed check publishes nothing and fails the task with ``AUDIT_FAILED``.
    :param retry_on_failed_checks: retry the task when a check fails (default: fail at once, since
        the same data fails the same checks again; set it when the data may still be arriving).
    :param durable: keep a try's work when its worker is lost after the write: a driver whose task
        is gone while it waits for the decision (its query ran and its checks passed) keeps its
        staging, and the next try publishes that staging instead of running the query again, if
        the rendered query, the table's settings, the checks and ``conf`` are unchanged. Only a
        live try publishes. Staging that no try adopts is removed by the next try or GC, like any
        staging. File formats of Spark's session catalog, Delta tables (a replace of an existing
        one then writes a staging table first, and publishes it with a second write, as with
        ``checks``), and ``replace`` or ``overwrite_partitions`` of an existing Iceberg table (its
        branch is kept; a new Iceberg table's try is not); templated (renders to true/false).
    :param publish_group: the task id of a ``PublishGroupOperator`` downstream of this task: this task
        stages and audits its table and holds it, and that task publishes every table of its group in
        one catalog commit, or none of them. Iceberg tables on a REST catalog, ``replace`` or
        ``overwrite_partitions`` of an existing table.
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
        "comment",
        "column_comments",
        "conn_id",
        "conf",
        "spark_submit_options",
        "checks",
        "durable",
    )
    template_ext: Sequence[str] = (".sql", ".hql")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "sql": "sql",
        "table_properties": "json",
        "column_comments": "json",
        "conf": "json",
    }
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
        comment: str | None = None,
        column_comments: Mapping[str, str] | str | None = None,
        allow_swap: bool = False,
        superseded_retention: datetime.timedelta | float = datetime.timedelta(hours=1),
        checks: Sequence[Check | Mapping[str, Any]] | None = None,
        retry_on_failed_checks: bool = False,
        durable: bool | str = False,
        publish_group: str | None = None,
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
            on_execute_callback=[ctas_begin, *callbacks(on_execute_callback)],
            on_success_callback=[ctas_finalize, *callbacks(on_success_callback)],
            on_failure_callback=[ctas_abort, *callbacks(on_failure_callback)],
            on_retry_callback=[ctas_abort, *callbacks(on_retry_callback)],
            **kwargs,
        )
        self.sql = sql
        self.target_table = target_table
        # The strategy serving this format checks what it can before any template renders; templated
        # values are checked once rendered, in begin, before any Spark work.
        strategy = strategy_for(table_format)
        strategy.check_options("create" if is_templated(mode) else mode, table_format, superseded_retention)
        self.mode = mode
        self.partition_by = partition_list(partition_by)
        self.table_format = table_format.lower()
        self.table_properties = table_properties
        self.comment = comment
        self.column_comments = column_comments
        self.allow_swap = allow_swap
        self.superseded_retention = superseded_retention
        self.checks = list(checks or [])
        self.retry_on_failed_checks = retry_on_failed_checks
        durable_flag(durable, table_format, strategy)
        self.durable = durable
        self.publish_group = group_member(publish_group, table_format, strategy, mode)
        self.conn_id = conn_id
        self.conf = conf
        self.spark_submit_options: Mapping[str, Any] | str = (
            spark_submit_options
            if isinstance(spark_submit_options, str) and is_templated(spark_submit_options)
            else rendered_submit_options(spark_submit_options)
        )
        self.openlineage_inject_parent_job_info = (
            conf_.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False)
            if openlineage_inject_parent_job_info is None
            else openlineage_inject_parent_job_info
        )
        target = check_known_arguments(
            strategy,
            sql=sql,
            sql_extensions=self.template_ext,
            target_table=target_table,
            mode=mode,
            partition_by=self.partition_by,
            table_format=table_format,
            table_properties=table_properties,
            comment=comment,
            column_comments=column_comments,
            checks=self.checks,
        )
        self.asset_events = asset_events
        self._table_outlet: Asset | AssetAlias | None = None
        if asset_events and self.publish_group is None:  # a group's publisher announces its members
            known = not (any(is_templated(v) for v in (target_table, mode, conf)) or has_templates(conf))
            namespace = strategy.lineage_namespace(conf, None) if known else None
            self._table_outlet = outlet_for(namespace=namespace, target=target, mode=mode, alias_name=self._alias_name)
            if self._table_outlet not in self.outlets:  # BaseOperator keeps outlets as a list
                self.outlets.append(self._table_outlet)

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
        options = rendered_submit_options(self.spark_submit_options)
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
            partition_by=partition_list(self.partition_by),  # rendered: a string is one column
            table_properties=self.table_properties,  # type: ignore[arg-type]
            allow_swap=self.allow_swap,
            superseded_retention=self.superseded_retention,
            comment=self.comment,
            column_comments=self.column_comments,
        )

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
        try:
            durable = durable_flag(self.durable, self.table_format, strategy_for(self.table_format))
            group_member(self.publish_group, self.table_format, strategy_for(self.table_format), self.mode)
        except CtasError as exc:
            raise_for_airflow(exc)
            raise
        digest = digest_of(self.sql, {"target": str(table.target), **table.spec_to_dict()}, checks, self.conf or {})
        request = PhaseRequest(
            phases=run_phases_for(checks, hold=self.publish_group is not None),
            table=table.to_dict(),
            sql=self.sql,
            faults=faults,
            checks=checks,
            durable=digest if durable else None,
        )
        started = time.monotonic()
        name = f"airflow-ctas {table.target} try {table.try_number}"
        try:
            result = runner.run(request, name=name)
        except CtasError as exc:
            raise_for_airflow(exc)
            raise
        apply_result(table, result, now(), self.log)
        self._persist(context, table)
        if not result.ok and table.state is not TxnState.COMMITTED:
            raise_for_airflow(run_failure(result.error or {}, retry_on_failed_checks=self.retry_on_failed_checks))
        self.log.info(
            "run: %s %s in %.2fs (%s rows; Spark application %s)",
            f"held for publish group {self.publish_group}:" if table.state is TxnState.PREPARED else table.outcome,
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
            # A mapped task's outlets are built from expand()'s values at run time, so its table's
            # asset is not registered: announce it through an alias, resolved when the event arrives.
            mine = [o for o in self.outlets if o != outlet]
            outlet = AssetAlias(name=self._alias_name)
            self.outlets = [*mine, outlet]
        namespace = strategy_for(self.table_format).namespace_after_run(self.conf, table.details)
        if record_publish_event(context, outlet, namespace, table):
            self.log.info("asset event for %s (outlet %s)", table.target, outlet)
