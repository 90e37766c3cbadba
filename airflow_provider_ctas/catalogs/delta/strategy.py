"""The Delta strategy as the registry sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.delta.table import FORMAT, DeltaTable, validate_format, validate_mode
from airflow_provider_ctas.catalogs.session_catalog.strategy import metastore_namespace
from airflow_provider_ctas.catalogs.strategy import RequestSpec, Strategy
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import validate_columns, validate_table_properties, validate_target
from airflow_provider_ctas.core.transaction import TwoPhaseTable

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.strategy import DriverSide

DELTA_CATALOG_CLASS = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def _validate(spec: RequestSpec) -> TwoPhaseTable:
    if spec.allow_swap:
        raise InvalidInputError("allow_swap does not apply to Delta tables: a replace is one Delta commit")
    return DeltaTable(
        key=spec.key,
        conn_id=spec.conn_id,
        target=validate_target(spec.target),
        mode=validate_mode(spec.mode),
        partition_by=validate_columns(spec.partition_by, "partition_by"),
        table_properties=validate_table_properties(spec.table_properties),
    )


def _check_options(mode: str, table_format: str, superseded_retention: object) -> None:
    # A replaced version stays readable by Delta's time travel until VACUUM removes its files;
    # superseded_retention is for session-catalog tables.
    validate_mode(mode)
    validate_format(table_format)


def _driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.delta.driver import DeltaDriver

    return DeltaDriver()


STRATEGY = Strategy(
    kind=DeltaTable.kind,
    formats=frozenset({FORMAT}),
    catalogs=frozenset({DELTA_CATALOG_CLASS}),
    validate=_validate,
    validate_target=validate_target,
    check_options=_check_options,
    driver=_driver,
    lineage_namespace=metastore_namespace,
)
