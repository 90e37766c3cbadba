"""The Iceberg strategy's driver side, as the registry hands it to the driver entry point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg.executor import IcebergExecutor
from airflow_provider_ctas.catalogs.iceberg.gc import IcebergGc
from airflow_provider_ctas.catalogs.iceberg.group import IcebergGroupExecutor
from airflow_provider_ctas.catalogs.iceberg.group_table import IcebergGroup
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.core.errors import CorruptStateError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.catalogs.strategy import StagingReader
    from airflow_provider_ctas.core.protocol import PhaseRequest
    from airflow_provider_ctas.core.transaction import TwoPhaseTable
    from airflow_provider_ctas.spark.engine import Reporter


class IcebergDriver:
    def executor(
        self, spark: SparkSession, table: TwoPhaseTable, request: PhaseRequest, log: Reporter
    ) -> IcebergExecutor:
        if not isinstance(table, IcebergTable):
            raise CorruptStateError(f"the Iceberg strategy cannot run a {table.kind!r} table")
        return IcebergExecutor(spark, table, request, log)

    def gc(
        self, spark: SparkSession, settings: Mapping[str, Any], log: Reporter, staging_readers: Sequence[StagingReader]
    ) -> dict[str, Any]:
        return IcebergGc(spark, dict(settings), log).run()


class IcebergGroupDriver:
    def executor(
        self, spark: SparkSession, table: TwoPhaseTable, request: PhaseRequest, log: Reporter
    ) -> IcebergGroupExecutor:
        if not isinstance(table, IcebergGroup):
            raise CorruptStateError(f"a publish group's driver cannot run a {table.kind!r} table")
        return IcebergGroupExecutor(spark, table, request, log)

    def gc(
        self, spark: SparkSession, settings: Mapping[str, Any], log: Reporter, staging_readers: Sequence[StagingReader]
    ) -> dict[str, Any]:
        raise CorruptStateError("a publish group has no staging of its own; GC runs per catalog")
