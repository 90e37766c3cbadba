"""The Delta strategy as the registry sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.delta import log
from airflow_provider_ctas.catalogs.delta.table import FORMAT, DeltaTable
from airflow_provider_ctas.catalogs.metastore.namespace import metastore_namespace
from airflow_provider_ctas.catalogs.strategy import StagingReader, Strategy

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.strategy import DriverSide

DELTA_CATALOG_CLASS = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def _driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.delta.driver import DeltaDriver

    return DeltaDriver()


STRATEGY = Strategy(
    kind=DeltaTable.kind,
    formats=frozenset({FORMAT}),
    catalogs=frozenset({DELTA_CATALOG_CLASS}),
    validate=DeltaTable.from_request,
    validate_target=DeltaTable.parse_target,
    check_options=DeltaTable.check_options,
    driver=_driver,
    durable=True,
    lineage_namespace=metastore_namespace,
    # A staging table's markers are in its log's first commit, written before its catalog entry.
    staging_reader=StagingReader("Delta", log.created_properties),
)
