"""The Delta strategy's phases, inside the Spark driver; each phase's work lives in its module.

begin    (``begin.py``) checks the session and the catalog, cleans up earlier tries' staging and
         returns a plan; for an existing target it fences earlier tries with an empty commit;
prepare  (``staging.py``) a new target, or an existing one with ``checks=``: writes the staging
         table (created empty with its markers first); an existing target without checks: nothing
         yet (a Delta write and its commit are one step);
audit    the checks, on the staging table (and, for ``overwrite_partitions``, the result it makes);
commit   publishes by the plan's mechanism (``publish/rename.py``, ``publish/in_place.py``);
abort    drops this and earlier tries' staging tables (their markers checked first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.audit import AuditTarget
from airflow_provider_ctas.catalogs.delta import durable
from airflow_provider_ctas.catalogs.delta.begin import begin
from airflow_provider_ctas.catalogs.delta.plan import DeltaPlan, Publish
from airflow_provider_ctas.catalogs.delta.publish.in_place import publish_in_place
from airflow_provider_ctas.catalogs.delta.publish.rename import publish_by_rename
from airflow_provider_ctas.catalogs.delta.run import DeltaRun
from airflow_provider_ctas.catalogs.delta.staging import create_staging, drop_staging, staging_of, write_staging
from airflow_provider_ctas.catalogs.delta.table import DeltaTable
from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient
from airflow_provider_ctas.catalogs.phase_executor import PhaseExecutor
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport, PhaseRequest, Reached
from airflow_provider_ctas.core.transaction import Outcome

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.core.durable import PreparedRecord
    from airflow_provider_ctas.spark.engine import Reporter


class DeltaExecutor(PhaseExecutor[DeltaTable, DeltaPlan]):
    audits = True

    def __init__(self, spark: SparkSession, table: DeltaTable, request: PhaseRequest, log: Reporter) -> None:
        super().__init__(spark, table, request, log)
        self.run_ = DeltaRun(
            spark, table, request, log, self.engine, self.progress, self.details, catalog=CatalogClient(spark)
        )
        self.written_rows = 0
        """What prepare wrote to the staging table (for the record a durable try keeps)."""

    def clean_up_this_try(self) -> list[str]:
        return drop_staging(self.run_, up_to=self.table.try_number)

    def begin(self, report: PhaseReport) -> None:
        self.plan = begin(self.run_, report, checks=bool(self.checks))
        self.fault("after_begin")

    def audit_target(self) -> AuditTarget:
        plan = self.planned()
        staged, target = staging_of(self.run_, plan).quoted, self.table.target.quoted
        if plan.mechanism is Publish.RENAME:
            return AuditTarget(staged=staged, published=None, columns=plan.columns)
        partial = self.table.partition_by if self.table.mode is Mode.OVERWRITE_PARTITIONS else ()
        return AuditTarget(staged=staged, published=target, columns=plan.columns, replaced_partitions_of=partial)

    def prepare(self, report: PhaseReport) -> None:
        plan = self.planned()
        if plan.adopted is not None:
            record = plan.adopted.record
            report.note = f"adopted the staging of try {record.prepared_by_try}; the query did not run"
            report.touched.append(f"{staging_of(self.run_, plan)} ({record.row_count} rows, adopted)")
            self.progress.reached = Reached.PREPARED
            return
        if not plan.stages:
            report.note = "a Delta write commits as it ends: the replace is written at commit, once the task decides"
            self.progress.reached = Reached.PREPARED
            self.fault("after_prepare")
            return
        self.fault("before_write")
        if not plan.staging_created_in_begin(bool(self.checks)):
            create_staging(self.run_, plan)
        try:
            touched, self.written_rows = write_staging(self.run_, self.written)
        except Exception as exc:
            if self._staging_dropped(plan):
                raise FencedError(f"{staging_of(self.run_, plan)} was dropped by a newer try's begin") from exc
            raise
        report.touched.append(touched)
        self.progress.reached = Reached.PREPARED
        self.fault("after_prepare")

    def _staging_dropped(self, plan: DeltaPlan) -> bool:
        """Whether this try's staging table is gone (a newer try's begin drops it: the fence of a
        create); if that cannot be read, the write's own failure stands."""
        try:
            return not self.run_.spark.catalog.tableExists(staging_of(self.run_, plan).quoted)
        except Exception:  # noqa: BLE001
            return False

    def adopted_record(self) -> PreparedRecord | None:
        adopted = self.plan.adopted if self.plan is not None else None
        return adopted.record if adopted is not None else None

    def keep_for_next_try(self, digest: str) -> str:
        return durable.keep(self.run_, self.planned(), digest, self.audit_results, self.written_rows)

    def commit(self, report: PhaseReport) -> None:
        self.fault("before_publish")
        plan = self.planned()
        if plan.mechanism is Publish.IN_PLACE:
            publish_in_place(self.run_, plan, self.audit_provenance(), report)
        else:
            publish_by_rename(self.run_, plan, self.audit_provenance(), report)
        if self.progress.published:
            self.progress.reached = Reached.COMMITTED
            self.fault("after_publish")

    def abort(self, report: PhaseReport) -> None:
        report.touched += drop_staging(self.run_, up_to=self.table.try_number)
        self.progress.reached = Reached.ABORTED
        self.progress.outcome = Outcome.ABORTED
