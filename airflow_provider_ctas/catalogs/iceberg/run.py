"""What every part of one Iceberg run shares inside the driver: the session, the transaction, the
catalog, how far the run got, and the fence check each metadata swap repeats."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.catalogs.progress import Progress
from airflow_provider_ctas.core import faults
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.protocol import PhaseRequest
from airflow_provider_ctas.core.requirements import AssertNewestFence, AssertNotSuperseded, Observed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.spark.engine import Engine, Reporter


@dataclass
class IcebergRun:
    spark: SparkSession
    table: IcebergTable
    request: PhaseRequest
    log: Reporter
    engine: Engine
    progress: Progress
    details: Details
    """What the run reports (XCom); nothing reads it back."""
    _catalog: IcebergCatalog | None = None

    @property
    def catalog(self) -> IcebergCatalog:
        if self._catalog is None:  # opened at first use: a missing catalog fails inside a phase
            self._catalog = IcebergCatalog(self.spark, self.table.target.catalog)
        return self._catalog

    def fault(self, point: str) -> None:
        faults.inject(self.request.faults, point, self.table.try_number, self.log.info, self.table.target.qualified)

    def warn_if(self, problem: str | None) -> None:
        if problem is not None:
            self.log.warning(problem)

    def refresh_spark(self) -> None:
        """Spark's catalog caches table metadata; a write must see the branch just made."""
        self.spark.sql(f"REFRESH TABLE {self.table.target.quoted}")

    def not_superseded(self, props: Mapping[str, str]) -> None:
        """Raises when a newer try of this task instance has raised its fence on the target."""
        observed = Observed(properties=props, fences=frozenset(fence.tries(props, self.table.txn_id)))
        AssertNotSuperseded(self.table.try_number).validate(observed)

    def still_ours(self, base: Any) -> None:
        """Raises unless this try's fence is the newest on ``base`` and its branch is there."""
        props = md.properties(base)
        observed = Observed(
            props, fences=frozenset(fence.tries(props, self.table.txn_id)), refs=frozenset(md.refs(base))
        )
        AssertNewestFence(self.table.try_number, str(self.table.target), self.table.branch).validate(observed)
