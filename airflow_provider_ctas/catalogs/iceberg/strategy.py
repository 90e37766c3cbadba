"""The Iceberg strategy as the registry sees it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg.table import FORMAT, IcebergTable, validate_format, validate_mode
from airflow_provider_ctas.catalogs.session_catalog.strategy import METASTORE_URIS, metastore_namespace
from airflow_provider_ctas.catalogs.strategy import RequestSpec, Strategy
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import (
    TableRef,
    validate_columns,
    validate_table_properties,
    validate_target,
)
from airflow_provider_ctas.core.transaction import TwoPhaseTable

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.strategy import DriverSide

SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"


def _target(text: object) -> TableRef:
    return validate_target(text, named_catalog=True)


def _validate(spec: RequestSpec) -> TwoPhaseTable:
    if spec.allow_swap:
        raise InvalidInputError("allow_swap does not apply to Iceberg tables: a replace never swaps tables")
    return IcebergTable(
        key=spec.key,
        conn_id=spec.conn_id,
        target=_target(spec.target),
        mode=validate_mode(spec.mode),
        partition_by=validate_columns(spec.partition_by, "partition_by"),
        table_properties=validate_table_properties(spec.table_properties),
    )


def _check_options(mode: str, table_format: str, superseded_retention: object) -> None:
    # A replaced version stays readable as an Iceberg snapshot until the table's own snapshot
    # expiry removes it; superseded_retention is for session-catalog tables.
    validate_mode(mode)
    validate_format(table_format)


def _driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.iceberg.driver import IcebergDriver

    return IcebergDriver()


def lineage_namespace(conf: Mapping[str, Any] | None, details: Mapping[str, Any] | None = None) -> str:
    """The metastore of the Iceberg catalog: the one the driver reported, else the only Iceberg
    catalog's ``uri`` in the operator's conf, else the Hadoop ``hive.metastore.uris`` it falls back to."""
    if details and isinstance(details.get("metastore_uris"), str):
        return metastore_namespace(None, details)
    conf = dict(conf or {})
    catalogs = [key for key, value in conf.items() if value == SPARK_CATALOG_CLASS and key.count(".") == 3]
    uris = {str(conf[f"{key}.uri"]) for key in catalogs if conf.get(f"{key}.uri")}
    if len(uris) == 1:
        return metastore_namespace({METASTORE_URIS: uris.pop()}, None)
    return metastore_namespace(conf, None)


STRATEGY = Strategy(
    kind=IcebergTable.kind,
    formats=frozenset({FORMAT}),
    catalogs=frozenset({SPARK_CATALOG_CLASS}),
    validate=_validate,
    validate_target=_target,
    check_options=_check_options,
    driver=_driver,
    lineage_namespace=lineage_namespace,
)
