"""The session-catalog strategy: file-format tables (parquet, orc, ...) in Spark's session catalog,
published by a rename, a location flip, a swap or partition switches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.metastore.namespace import metastore_namespace
from airflow_provider_ctas.catalogs.session_catalog.table import (
    DEFAULT_RETENTION_SECONDS,
    FILE_FORMATS,
    SessionCatalogTable,
    validate_format,
    validate_retention,
)
from airflow_provider_ctas.catalogs.strategy import RequestSpec, Strategy
from airflow_provider_ctas.core.comments import validate_comments
from airflow_provider_ctas.core.identifiers import (
    SESSION_CATALOG,
    validate_table_properties,
    validate_target,
)
from airflow_provider_ctas.core.modes import parse_mode
from airflow_provider_ctas.core.partitioning import columns_only, validate_partition_by
from airflow_provider_ctas.core.transaction import TwoPhaseTable

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.strategy import DriverSide


def _validate(spec: RequestSpec) -> TwoPhaseTable:
    columns = columns_only(validate_partition_by(spec.partition_by), "file-format")
    mode = parse_mode(spec.mode, partition_by=columns)
    retention = DEFAULT_RETENTION_SECONDS if spec.superseded_retention is None else spec.superseded_retention
    return SessionCatalogTable(
        key=spec.key,
        conn_id=spec.conn_id,
        target=validate_target(spec.target),
        mode=mode,
        table_format=validate_format(spec.table_format),
        partition_by=columns,
        table_properties=validate_table_properties(spec.table_properties),
        allow_swap=bool(spec.allow_swap),
        superseded_retention_seconds=validate_retention(retention),
        comments=validate_comments(spec.comment, spec.column_comments),
    )


def _check_options(mode: str, table_format: str, superseded_retention: object) -> None:
    parse_mode(mode)
    validate_format(table_format)
    validate_retention(superseded_retention)


def _driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.session_catalog.driver import SessionCatalogDriver

    return SessionCatalogDriver()


STRATEGY = Strategy(
    kind=SessionCatalogTable.kind,
    formats=FILE_FORMATS,
    catalogs=frozenset({SESSION_CATALOG}),
    validate=_validate,
    validate_target=validate_target,
    check_options=_check_options,
    driver=_driver,
    lineage_namespace=metastore_namespace,
    gc_scope="session",
    durable=True,
)
