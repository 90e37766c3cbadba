"""What every part of one Iceberg run shares inside the driver: the session, the transaction, the
catalog, how far the run got, and the fence check each metadata swap repeats."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.shape import without_other_tries
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.progress import Progress
from airflow_provider_ctas.core import faults
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import UnsupportedTargetError
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

    def open_branch(self, existing: Any, check: Callable[[Any], None] | None = None) -> tuple[Any, int]:
        """Makes this try's branch of ``existing`` from ``main`` in the metadata swap that raises
        the transaction's fence to this try and drops earlier tries' branches; returns the metadata
        it was made on and its ``main``. ``check`` may refuse that metadata first."""
        catalog, table = self.catalog, self.table
        txn, try_number = table.txn_id, table.try_number
        begun = fence.begun_record(now_iso(), table.key.to_dict())
        based_on: list[tuple[Any, int]] = []

        def stage(base: Any, builder: Any) -> Any:
            props = md.properties(base)
            self.not_superseded(props)
            main = md.main_snapshot(base)
            if main is None:
                raise UnsupportedTargetError(
                    f"{table.target} has no snapshot yet (created empty); insert into it once, or drop it, first"
                )
            if check is not None:
                check(base)
            based_on[:] = [(base, main)]
            builder = without_other_tries(base, builder, txn, try_number)
            older = fence.keys_of(props, txn, up_to=try_number - 1)
            if older:
                builder = builder.removeProperties(catalog.java_set(older))
            return builder.setRef(table.branch, catalog.branch_ref(main)).setProperties(
                {fence.fence_key(txn, try_number): begun}
            )

        catalog.commit(existing, stage)
        self.refresh_spark()
        return based_on[0]
