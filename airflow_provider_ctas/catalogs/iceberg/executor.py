"""The Iceberg strategy's phases, inside the Spark driver; each phase's work lives in its module.

begin    (``begin.py``) checks the catalog, cleans up earlier tries of this transaction and returns
         a plan: a new target is staged as an empty table with its markers, an existing one as this
         try's branch, made in the metadata swap that raises the transaction's fence to this try
         (a replace that changes its shape also gets a staging table in the new shape: ``reshape.py``);
prepare  (``staged.py``) writes the query to the staging table or the branch (``main`` is
         untouched, readers see the old version); the snapshot summary carries the provenance;
audit    (with checks) evaluates them on what was staged; a failed check publishes nothing;
hold     (a publish group's member, instead of commit) keeps the branch for the group's publisher;
commit   publishes by the plan's mechanism (``publish/rename.py``, ``publish/branch.py``,
         ``publish/reshape.py`` for a replace that changes the table's shape);
abort    (``cleanup.py``) drops this and earlier tries' staging tables and branches (markers checked first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.audit import AuditTarget
from airflow_provider_ctas.catalogs.iceberg import durable
from airflow_provider_ctas.catalogs.iceberg.begin import begin, stage_branch
from airflow_provider_ctas.catalogs.iceberg.cleanup import clean_tries
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish, Staged
from airflow_provider_ctas.catalogs.iceberg.publish.branch import hold, publish_branch
from airflow_provider_ctas.catalogs.iceberg.publish.rename import publish_by_rename
from airflow_provider_ctas.catalogs.iceberg.publish.reshape import publish_reshape
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.staged import audit_target, write
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.catalogs.phase_executor import PhaseExecutor
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.protocol import PhaseReport, PhaseRequest, Reached
from airflow_provider_ctas.core.transaction import Outcome

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.core.durable import PreparedRecord
    from airflow_provider_ctas.spark.engine import Reporter


class IcebergExecutor(PhaseExecutor[IcebergTable, IcebergPlan]):
    audits = True

    def __init__(self, spark: SparkSession, table: IcebergTable, request: PhaseRequest, log: Reporter) -> None:
        super().__init__(spark, table, request, log)
        self.run_ = IcebergRun(spark, table, request, log, self.engine, self.progress, self.details)
        self.staged: Staged | None = None
        """What prepare wrote (or the adopted branch holds), for the phases after it."""
        self.holds = "hold" in request.phases
        """A publish group's member: it stages on a branch and its publisher publishes."""

    def clean_up_this_try(self) -> list[str]:
        return clean_tries(self.run_, up_to=self.table.try_number)

    def _prepared(self) -> Staged:
        if self.staged is None:
            raise InvalidInputError("commit runs after prepare, in the same run")
        return self.staged

    def begin(self, report: PhaseReport) -> None:
        self.plan = begin(self.run_, report, holds=self.holds)
        adopted = self.plan.adopted if self.plan is not None else None
        if adopted is not None:
            self.staged = Staged(adopted.snapshot_id, adopted.record.row_count)
        self.fault("after_begin")

    def keep_for_next_try(self, digest: str) -> str:
        return durable.keep(self.run_, self.planned(), self._prepared(), digest, self.audit_results)

    def prepare(self, report: PhaseReport) -> None:
        plan = self.planned()
        if plan.adopted is not None:
            record = plan.adopted.record
            report.note = f"adopted the branch of try {record.prepared_by_try}; the query did not run"
            report.touched.append(
                f"{self.table.target} ({record.row_count} rows on branch {self.table.branch}, adopted)"
            )
            self.progress.reached = Reached.PREPARED
            return
        if self.request.sql is None:
            raise InvalidInputError("no SQL was sent for this transaction")
        self.fault("before_write")
        self.staged, touched = write(self.run_, plan, f"prepare {self.table.target}", self.written)
        report.touched.append(touched)
        self.progress.reached = Reached.PREPARED
        self.fault("after_prepare")

    def adopted_record(self) -> PreparedRecord | None:
        adopted = self.plan.adopted if self.plan is not None else None
        return adopted.record if adopted is not None else None

    def audit_target(self) -> AuditTarget:
        return audit_target(self.run_, self.planned(), self.staged)

    def hold(self, report: PhaseReport) -> None:
        hold(self.run_, self.planned(), self._prepared(), self.audit_provenance(), report)
        self.fault("after_hold")

    def commit(self, report: PhaseReport) -> None:
        self.fault("before_publish")
        plan, staged = self.planned(), self._prepared()
        if plan.mechanism is Publish.RESHAPE:
            self.staged = publish_reshape(self.run_, plan, staged, self.audit_provenance(), report)
            self._committed()
            return
        if plan.mechanism is Publish.RENAME:
            into = publish_by_rename(self.run_, staged, self.audit_provenance(), report)
            if into is None:
                self._committed()
                return
            # Another task instance created the target first: this try's partitions go into it,
            # staged as for any target, and what is published is this second write.
            self.plan, touched = stage_branch(self.run_, into, plan.schema, into.operations().refresh())
            report.touched.append(touched)
            self.staged, touched = write(self.run_, self.plan, f"commit {self.table.target}", self.written)
            report.touched.append(touched)
            if self.checks:
                self.audit(report)
            plan, staged = self.plan, self.staged
        self.staged = publish_branch(self.run_, plan, staged, self.audit_provenance(), report)
        self._committed()

    def _committed(self) -> None:
        if self.progress.published:
            self.progress.reached = Reached.COMMITTED
            self.fault("after_publish")

    def abort(self, report: PhaseReport) -> None:
        report.touched += clean_tries(self.run_, up_to=self.table.try_number)
        self.progress.reached = Reached.ABORTED
        self.progress.outcome = Outcome.ABORTED
