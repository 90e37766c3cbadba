"""The session-catalog strategy's driver side, as the registry hands it to the driver entry point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.gc_ledger import GcParams
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
from airflow_provider_ctas.catalogs.session_catalog.gc import SessionCatalogGc
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.errors import CorruptStateError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.catalogs.strategy import StagingReader
    from airflow_provider_ctas.core.protocol import PhaseRequest
    from airflow_provider_ctas.core.transaction import TwoPhaseTable
    from airflow_provider_ctas.spark.engine import Reporter


class SessionCatalogDriver:
    def executor(
        self, spark: SparkSession, table: TwoPhaseTable, request: PhaseRequest, log: Reporter
    ) -> SessionCatalogExecutor:
        if not isinstance(table, SessionCatalogTable):
            raise CorruptStateError(f"the session-catalog strategy cannot run a {table.kind!r} table")
        return SessionCatalogExecutor(spark, table, request, log)

    def gc(
        self, spark: SparkSession, settings: Mapping[str, Any], log: Reporter, staging_readers: Sequence[StagingReader]
    ) -> dict[str, Any]:
        return SessionCatalogGc(spark, GcParams.from_dict(dict(settings)), log, staging_readers).run()
