"""What every strategy's executor shares: how far one run got, the phases by name, the audit of
what a try staged (or the record of an adopted try's), and the test-only fault points."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from airflow_provider_ctas.catalogs.audit import Auditor, AuditTarget, raise_if_failed, results_to_details, run_audit
from airflow_provider_ctas.catalogs.progress import Progress, ReportsProgress
from airflow_provider_ctas.catalogs.write_observation import WriteObservation
from airflow_provider_ctas.core import faults, markers
from airflow_provider_ctas.core.checks import CheckResult, checks_from_wire, summary
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.protocol import Reached
from airflow_provider_ctas.core.transaction import TwoPhaseTable
from airflow_provider_ctas.spark.engine import engine_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.core.durable import PreparedRecord
    from airflow_provider_ctas.core.protocol import PhaseReport, PhaseRequest
    from airflow_provider_ctas.spark.engine import Reporter

T = TypeVar("T", bound=TwoPhaseTable)
P = TypeVar("P")


class PhaseExecutor(ReportsProgress, ABC, Generic[T, P]):
    audits: ClassVar[bool] = False
    """Whether every try stages a version that checks can read before the publish (``audit_target``)."""

    def __init__(self, spark: SparkSession, table: T, request: PhaseRequest, log: Reporter) -> None:
        self.spark, self.table, self.request, self.log = spark, table, request, log
        self.engine = engine_for(spark)
        self.progress = Progress()
        self.details: Details = {}
        self.began = False
        self.plan: P | None = None
        """What begin decided (the strategy's plan), for the phases after it."""
        self.checks = checks_from_wire(request.checks)
        self.audit_results: list[CheckResult] = []
        self.written = WriteObservation(self.checks, partial=table.replaces_partitions)
        """The checks the write measures as it writes (``write_observation``)."""

    @property
    def nothing_to_do(self) -> bool:
        return self.began and self.progress.outcome is not None and not self.progress.published

    def planned(self) -> P:
        if self.plan is None:
            raise InvalidInputError("prepare and commit run after begin, in the same run")
        return self.plan

    def spark_jobs(self) -> int | None:
        return self.engine.job_count()

    def run(self, phase: str, report: PhaseReport) -> None:
        if phase == "begin":
            if self.checks and not self.audits:
                self.refuse_checks()
            self.began = True
            self.begin(report)
            if self.checks and self.progress.reached is Reached.BEGUN:
                # Checks that cannot run fail here, before any data is written.
                Auditor(self.spark, self.checks, self.audit_target()).analyse()
        elif phase == "prepare":
            self.prepare(report)
        elif phase == "audit":
            self.audit(report)
        elif phase == "hold":
            self.hold(report)
        elif phase == "commit":
            self.commit(report)
        elif phase == "abort":
            self.abort(report)
        else:
            raise InvalidInputError(f"unknown phase {phase!r}")

    def refuse_checks(self) -> None:
        raise InvalidInputError(f"checks are not supported for {self.table.format_name} tables yet; remove checks=")

    def audit_target(self) -> AuditTarget:
        """What this try staged, and the published version it would replace."""
        raise NotImplementedError

    def adopted_record(self) -> PreparedRecord | None:
        """With ``durable=True``: the record of the earlier try's staging this try took over."""
        return None

    def audit(self, report: PhaseReport) -> None:
        if not self.audits:
            self.refuse_checks()
        record = self.adopted_record()
        if record is not None:  # the same checks (the digest says so) passed on this very staging
            self.details["checks"] = list(record.checks)
            report.note = f"checks passed in try {record.prepared_by_try}: {record.checks_summary}"
            return
        target = self.audit_target()
        auditor = Auditor(self.spark, self.checks, target)
        results = run_audit(auditor, self.engine, self.log, str(self.table.target), self.written.measured)
        self.audit_results = results
        self.details["checks"] = results_to_details(results)
        report.touched.append(
            f"{target.label or target.staged} ({sum(r.passed for r in results)}/{len(results)} checks passed)"
        )
        self.fault("after_audit")
        raise_if_failed(results)

    def audit_provenance(self) -> dict[str, str]:
        """The checks' one-line summary for the published version's properties, when there were checks."""
        record = self.adopted_record()
        if record is not None:
            return {markers.CHECKS: record.checks_summary} if record.checks_summary else {}
        return {markers.CHECKS: summary(self.audit_results)} if self.audit_results else {}

    def hold(self, report: PhaseReport) -> None:
        """A publish group's member: keep what this try staged for the group's publisher."""
        raise InvalidInputError(f"publish groups are not supported for {self.table.format_name} tables")

    def keep_for_next_try(self, digest: str) -> str:
        raise InvalidInputError(f"durable=True is not supported for {self.table.format_name} tables yet")

    def fault(self, point: str) -> None:
        faults.inject(self.request.faults, point, self.table.try_number, self.log.info, self.table.target.qualified)

    @abstractmethod
    def begin(self, report: PhaseReport) -> None: ...
    @abstractmethod
    def prepare(self, report: PhaseReport) -> None: ...
    @abstractmethod
    def commit(self, report: PhaseReport) -> None: ...
    @abstractmethod
    def abort(self, report: PhaseReport) -> None: ...
    @abstractmethod
    def clean_up_this_try(self) -> list[str]: ...

    def clean_up_after_publish(self) -> list[str]:
        """After a failure that followed this try's publish (the publish stands): what the publish
        would have removed of older tries next. Only the session catalog defers any (older tries'
        staging directories, deleted once a newer try has published); never raises."""
        return []
