"""The Delta strategy's driver side, as the registry hands it to the driver entry point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.delta.executor import DeltaExecutor
from airflow_provider_ctas.catalogs.delta.table import DeltaTable
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.catalogs.strategy import StagingReader
    from airflow_provider_ctas.core.protocol import PhaseRequest
    from airflow_provider_ctas.core.transaction import TwoPhaseTable
    from airflow_provider_ctas.spark.engine import Reporter


class DeltaDriver:
    def executor(
        self, spark: SparkSession, table: TwoPhaseTable, request: PhaseRequest, log: Reporter
    ) -> DeltaExecutor:
        if not isinstance(table, DeltaTable):
            raise CorruptStateError(f"the Delta strategy cannot run a {table.kind!r} table")
        return DeltaExecutor(spark, table, request, log)

    def gc(
        self, spark: SparkSession, settings: Mapping[str, Any], log: Reporter, staging_readers: Sequence[StagingReader]
    ) -> dict[str, Any]:
        raise InvalidInputError(
            "Delta tables live in the session catalog: run airflow-ctas-gc without --catalog and with Delta's "
            "catalog settings in --conf (it drops a killed try's marked staging table); files of a replace that "
            "never committed are in no Delta version, and Delta's VACUUM removes them"
        )
