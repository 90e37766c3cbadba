"""What the executors of the whole-table formats (Iceberg, Delta) share: how far one run got, the
phases by name, and the test-only fault points."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from airflow_provider_ctas.catalogs.progress import Progress
from airflow_provider_ctas.catalogs.table_modes import WholeTable
from airflow_provider_ctas.core import faults
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.spark.engine import engine_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.spark.engine import Reporter
    from airflow_provider_ctas.spark.protocol import PhaseReport, PhaseRequest

T = TypeVar("T", bound=WholeTable)


class PhaseExecutor(ABC, Generic[T]):
    def __init__(self, spark: SparkSession, table: T, request: PhaseRequest, log: Reporter) -> None:
        self.spark, self.table, self.request, self.log = spark, table, request, log
        self.engine = engine_for(spark)
        self.progress = Progress()
        self.details: dict[str, Any] = {}
        self.began = False

    @property
    def published(self) -> bool:
        return self.progress.published

    @property
    def reached(self) -> str:
        return self.progress.reached.value

    @property
    def outcome(self) -> str | None:
        return self.progress.outcome.value if self.progress.outcome else None

    @property
    def nothing_to_do(self) -> bool:
        return self.began and self.progress.outcome is not None and not self.progress.published

    def spark_jobs(self) -> int | None:
        return self.engine.job_count()

    def run(self, phase: str, report: PhaseReport) -> None:
        if phase == "begin":
            if self.request.checks:
                self.refuse_checks()
            self.begin(report)
        elif phase == "prepare":
            self.prepare(report)
        elif phase == "commit":
            self.commit(report)
        elif phase == "abort":
            self.abort(report)
        elif phase == "audit":
            self.refuse_checks()
        else:
            raise InvalidInputError(f"unknown phase {phase!r}")

    def refuse_checks(self) -> None:
        raise InvalidInputError(f"checks are not supported for {self.table.format_name} tables yet; remove checks=")

    def fault(self, point: str) -> None:
        faults.inject(self.request.faults, point, self.table.try_number, self.log.info)

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
