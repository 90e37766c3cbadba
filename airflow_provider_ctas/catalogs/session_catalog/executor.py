"""The session-catalog strategy's phases, run inside the Spark driver: a thin façade over
``begin``, the publish mechanisms (``publish/``), ``recovery`` and ``retention``.

begin    returns a :class:`Plan` (or one that says there is nothing to do);
prepare  ``INSERT INTO staging BY NAME <select>``, or an append to staging that is only a marked
         directory: the only data written;
audit    (with checks) evaluates them on staging; a failed check publishes nothing;
commit   checks the fence, publishes in one metadata operation as the plan says, then records
         provenance and retires what was superseded;
abort    drops staging of this and earlier tries, restores a target that a crashed swap had moved
         aside, and deletes orphan staging directories whose marker file names this transaction.

Every drop is preceded by an ownership check on markers (``ownership``). Statements reach Spark
with every name quoted and every value a string literal.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.audit import AuditTarget
from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient, now_iso
from airflow_provider_ctas.catalogs.phase_executor import PhaseExecutor
from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.catalogs.session_catalog import adoption, recovery
from airflow_provider_ctas.catalogs.session_catalog.begin import begin
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Plan, Publish, partition_directories
from airflow_provider_ctas.catalogs.session_catalog.publish import PUBLISHERS
from airflow_provider_ctas.catalogs.session_catalog.publish.partitions import release_managed_staging
from airflow_provider_ctas.catalogs.session_catalog.publish.rename import TargetCreatedMeanwhile
from airflow_provider_ctas.catalogs.session_catalog.publish.request import Publication
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import quote
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport, PhaseRequest, Reached
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.comments import read_comments, set_comments
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_ctas.core.durable import PreparedRecord
    from airflow_provider_ctas.spark.engine import Reporter


class SessionCatalogExecutor(PhaseExecutor[SessionCatalogTable, Plan]):
    """Runs the phases of one try; begin's plan is kept for the phases that follow it."""

    audits = True

    def __init__(self, spark: SparkSession, table: SessionCatalogTable, request: PhaseRequest, log: Reporter) -> None:
        super().__init__(spark, table, request, log)
        catalog = CatalogClient(spark, scratch_database=table.target.database)
        self.ctx = RunContext(spark, table, request, log, catalog, progress=self.progress, details=self.details)

    def begin(self, report: PhaseReport) -> None:
        self.plan = begin(self.ctx, report)

    def audit_target(self) -> AuditTarget:
        ctx, plan = self.ctx, self.planned()
        table = ctx.table
        published = ctx.catalog.table_info(table.target) is not None
        return AuditTarget(
            staged=self._staged(),
            published=table.target.quoted if published else None,
            columns=[name for name, _ in plan.columns],
            replaced_partitions_of=table.partition_by if table.mode is Mode.OVERWRITE_PARTITIONS else (),
            label=str(ctx.staging_directory or ctx.staging_table),
        )

    def adopted_record(self) -> PreparedRecord | None:
        return self.ctx.adopted.record if self.ctx.adopted is not None else None

    def prepare(self, report: PhaseReport) -> None:
        ctx, plan = self.ctx, self.planned()
        if ctx.request.sql is None:
            raise InvalidInputError("no SQL was sent for this transaction")
        if ctx.adopted is not None:
            record = ctx.adopted.record
            ctx.details["row_count"] = record.row_count
            report.note = f"adopted the staging of try {record.prepared_by_try}; the query did not run"
            report.touched.append(f"{ctx.staging_directory or ctx.staging_table} ({record.row_count} rows, adopted)")
            ctx.progress.reached = Reached.PREPARED
            return
        staging = ctx.staging_table
        with ctx.catalog.engine.progress(f"prepare {ctx.table.target}", ctx.log):
            sql = ctx.request.sql
            metrics = self._insert(sql) if plan.registered_staging else self._append(plan, sql)
        if "row_count" not in metrics:
            metrics["row_count"] = int(ctx.spark.table(self._staged()).count())
        ctx.details.update(metrics)
        report.touched.append(f"{ctx.staging_directory or staging} ({metrics['row_count']} rows written)")
        ctx.progress.reached = Reached.PREPARED
        ctx.fault("after_prepare")

    def _insert(self, sql: str) -> Details:
        """``INSERT INTO staging BY NAME``, observed when the write measures checks."""
        ctx = self.ctx
        staging = ctx.staging_table
        if not self.written.checks:
            return self._write_metrics(ctx.spark.sql(f"INSERT INTO {staging.quoted} BY NAME {as_subquery(sql)}"))

        engine = ctx.catalog.engine

        def insert() -> Details:
            query, schema = ctx.spark.sql(as_subquery(sql)), ctx.spark.table(staging.quoted).schema
            frame = self.written.attach(query, schema, rows_reported=engine.reports_written_rows)
            result = engine.insert_observed(frame, staging)
            metrics = self._write_metrics(result) if result is not None else {}
            measured = self.written.collect(ctx.log, metrics.get("row_count"))
            if measured is not None:
                metrics.setdefault("row_count", measured.rows)
            return metrics

        empty = f"SELECT 1 FROM {staging.quoted} LIMIT 1"
        return self.written.write(insert, ctx.log, lambda: not ctx.spark.sql(empty).take(1))

    def _append(self, plan: Plan, sql: str) -> Details:
        """The new version appended to the staging directory: append keeps its marker, and Spark SQL
        has no ``INSERT INTO`` a path. The columns go in the staging's order, partitions into
        Hive-style directories as a table's insert writes them, with the target's options (a CSV
        separator: the files become the target's) and its CHAR and VARCHAR lengths; the rows (and
        what checks the write measures) are counted by an observation of the write (no second job),
        files, bytes and partitions by listing the directory once."""
        ctx = self.ctx
        root, partition_by = plan.staging_location or "", list(ctx.table.partition_by)

        def append() -> Details:
            columns = [ctx.column_writes.get(name, quote(name)) for name, _ in plan.columns]
            frame = ctx.spark.sql(as_subquery(sql)).selectExpr(*columns)
            writer = self.written.attach(frame, ctx.staged_schema).write.mode("append").options(**ctx.storage_options)
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            writer.format(ctx.table.table_format).save(root)
            files = ctx.catalog.fs.data_files(root)
            if partition_by:
                ctx.staged_partitions = partition_directories(root, [path for path, _ in files], partition_by)
            metrics: Details = {"files": len(files), "bytes": sum(size for _, size in files)}
            measured = self.written.collect(ctx.log)
            if measured is not None:
                metrics["row_count"] = measured.rows
            return metrics

        return self.written.write(append, ctx.log, lambda: not ctx.catalog.fs.data_files(root))

    def _staged(self) -> str:
        """The name the staged version is read by: the staging table, or a temporary view over the
        staging directory, defined now so that it lists the files written so far."""
        ctx = self.ctx
        staging = ctx.staging_table
        if ctx.staging_directory is None:
            return staging.quoted
        reader = ctx.spark.read.format(ctx.table.table_format).options(**ctx.storage_options)
        if ctx.staged_schema is not None:
            reader = reader.schema(ctx.staged_schema)
        reader.load(ctx.staging_directory).createOrReplaceTempView(staging.table)
        return quote(staging.table)

    def _write_metrics(self, result: DataFrame) -> Details:
        try:
            return self.ctx.catalog.engine.write_metrics(result)
        except Exception as exc:  # noqa: BLE001 - metrics are a report; counting rows is the fallback
            self.ctx.log.warning(f"could not read write metrics ({first_line(exc)}); counting rows instead")
            return {}

    def commit(self, report: PhaseReport) -> None:
        ctx, plan = self.ctx, self.planned()
        staging = ctx.staging_table  # each publisher checks it is still this try's right before it publishes
        ctx.fault("before_publish")
        provenance = {markers.PUBLISHED_AT: now_iso()}
        if "row_count" in ctx.details:
            provenance[markers.ROW_COUNT] = str(ctx.details["row_count"])
        provenance.update(self.audit_provenance())
        # A rename needs nothing of the target: it fails if the target appeared since begin.
        target_info = (
            None if plan.mechanism is Publish.RENAME else ctx.catalog.table_info(ctx.table.target, expected=True)
        )
        publication = Publication(plan, target_info, staging, provenance, report, ctx.staged_partitions)
        try:
            PUBLISHERS[plan.mechanism or Publish.RENAME](ctx, publication)
        except TargetCreatedMeanwhile as lost:
            ctx.log.info(f"{lost}; this try's partitions go into it")
            plan = self.plan = self._into_created_target(plan, provenance, report)
        except BaseException:
            ctx.settle()
            raise
        if ctx.progress.published:  # the new version's marker only: beside what the publisher left running
            ctx.after_publish_meanwhile(
                "marker update", lambda: self._record_publish(plan, provenance[markers.PUBLISHED_AT])
            )
        ctx.settle()  # what the publisher began is done before anything else touches the target
        if ctx.progress.published:
            ctx.progress.reached = Reached.COMMITTED
            ctx.fault("after_publish")
            if ctx.table.comments:  # a new table has them from its DDL; an existing one gets them now
                target = ctx.table.target
                ctx.after_publish(
                    "set the comments",
                    lambda: report.touched.extend(
                        f"{target} ({what})"
                        for what in set_comments(
                            ctx.spark, target, ctx.table.comments.changes_to(read_comments(ctx.spark, target))
                        )
                    ),
                )
            if ctx.request.durable:
                record = adoption.record_path(self._published_location(plan))
                ctx.after_publish("remove the prepared record", lambda: ctx.catalog.fs.delete(record))
            report.touched += recovery.finish_cleanup(ctx)

    def clean_up_after_publish(self) -> list[str]:
        return recovery.finish_cleanup(self.ctx)

    def keep_for_next_try(self, digest: str) -> str:
        """Durable tries: the record that lets the next try adopt this staging if this task is lost."""
        return adoption.keep_for_next_try(
            self.ctx, self.planned(), digest, self.audit_provenance().get(markers.CHECKS, "")
        )

    def _into_created_target(self, plan: Plan, provenance: dict[str, str], report: PhaseReport) -> Plan:
        """Another task instance created the target while this try staged its partitions (a
        backfill's first dates race): they are switched into that table, as for any existing
        target, without a retry and without writing them again."""
        ctx, staging = self.ctx, self.ctx.staging_table
        staged = ctx.catalog.partitions(staging, list(ctx.table.partition_by))
        external = plan.external_staging
        plan = replace(plan, mechanism=Publish.PARTITIONS)
        ctx.details["publish_mechanism"] = Publish.PARTITIONS.value
        if self.checks:  # the result now includes the rows the other run published
            self.plan = plan
            self.audit(report)
            provenance.update(self.audit_provenance())
        if not external:
            report.touched.append(release_managed_staging(ctx, staging, staged))
        target_info = ctx.catalog.table_info(ctx.table.target)
        PUBLISHERS[Publish.PARTITIONS](ctx, Publication(plan, target_info, staging, provenance, report, staged))
        return plan

    def _record_publish(self, plan: Plan, published_at: str) -> None:
        """The new version's marker says it is published and which superseded versions it keeps."""
        ctx = self.ctx
        root = self._published_location(plan)
        if plan.mechanism is not Publish.PARTITIONS:
            ctx.details["location"] = root
        read = ctx.staging_marker if root == ctx.staging_directory else None
        ctx.catalog.mark_published(root, ctx.table.txn_id, published_at, tuple(ctx.retained.values()), read)

    def _published_location(self, plan: Plan) -> str:
        """Where the published data lives, known without asking: the staging directory the target
        (or its partitions) now points at, or, when the metastore moved a managed staging table
        into place by a rename, the target's default location."""
        if plan.external_staging and plan.staging_location:
            return plan.staging_location
        target = self.ctx.table.target
        return f"{self.ctx.catalog.db_location(target.database)}/{target.table}"

    def abort(self, report: PhaseReport) -> None:
        ctx = self.ctx
        report.touched += recovery.clean_tries(ctx, up_to=ctx.table.try_number)
        info = ctx.catalog.table_info(ctx.table.target)
        published_try = ctx.published_try(info) if info is not None else None
        if published_try is not None:
            ctx.details["published_by_try"] = published_try
            ctx.log.warning(
                f"{ctx.table.target} had been published by try {published_try} before the failure; "
                "it is complete and stays"
            )
        ctx.progress.reached = Reached.ABORTED
        ctx.progress.outcome = Outcome.ABORTED

    def clean_up_this_try(self) -> list[str]:
        """After a failure before publishing: this and earlier tries' staging, in the driver."""
        return recovery.clean_tries(self.ctx, up_to=self.ctx.table.try_number)
