"""The session-catalog strategy: file-format tables (parquet, orc, ...) in Spark's session catalog,
published by a rename, a location flip, a swap or partition switches."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow_provider_ctas.catalogs.session_catalog.table import (
    DEFAULT_RETENTION_SECONDS,
    FILE_FORMATS,
    SessionCatalogTable,
    validate_format,
    validate_retention,
)
from airflow_provider_ctas.catalogs.strategy import RequestSpec, Strategy
from airflow_provider_ctas.core.identifiers import (
    SESSION_CATALOG,
    validate_columns,
    validate_table_properties,
    validate_target,
)
from airflow_provider_ctas.core.modes import parse_mode
from airflow_provider_ctas.core.transaction import TwoPhaseTable

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.strategy import DriverSide

METASTORE_URIS = "spark.hadoop.hive.metastore.uris"


def _validate(spec: RequestSpec) -> TwoPhaseTable:
    columns = validate_columns(spec.partition_by, "partition_by")
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
    )


def _check_options(mode: str, table_format: str, superseded_retention: object) -> None:
    parse_mode(mode)
    validate_format(table_format)
    validate_retention(superseded_retention)


def _driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.session_catalog.driver import SessionCatalogDriver

    return SessionCatalogDriver()


def metastore_namespace(conf: Mapping[str, Any] | None, details: Mapping[str, Any] | None = None) -> str:
    """``hive://host:port`` of the metastore, as in OpenLineage's naming spec; ``hive://embedded``
    for Spark's embedded one. Once the driver ran, the URIs it reported using (``metastore_uris``:
    whatever configured it); before, ``spark.hadoop.hive.metastore.uris`` from the operator's
    ``conf``, then SPARK_CONF_DIR's spark-defaults.conf."""
    reported = (details or {}).get("metastore_uris")
    if isinstance(reported, str):
        return _namespace(reported)
    uris = (conf or {}).get(METASTORE_URIS)
    if not uris and (conf_dir := os.environ.get("SPARK_CONF_DIR")):
        uris = spark_defaults(Path(conf_dir, "spark-defaults.conf")).get(METASTORE_URIS)
    return _namespace(str(uris or ""))


def spark_defaults(path: Path) -> dict[str, str]:
    """A spark-defaults.conf as Spark reads it: ``java.util.Properties`` rules (``key value``,
    ``key=value``, ``key: value``, tabs, comments, continued lines, escapes), values trimmed."""
    import javaproperties  # Airflow side only: the driver (which has no such package) never reads this file

    if not path.exists():
        return {}
    with path.open(encoding="utf-8") as handle:
        return {key: value.strip() for key, value in javaproperties.load(handle).items()}


def _namespace(uris: str) -> str:
    if not uris.strip():
        return "hive://embedded"
    first = urlparse(uris.split(",")[0].strip())
    return f"hive://{first.hostname}:{first.port or 9083}"


STRATEGY = Strategy(
    kind=SessionCatalogTable.kind,
    formats=FILE_FORMATS,
    catalogs=frozenset({SESSION_CATALOG}),
    validate=_validate,
    validate_target=validate_target,
    check_options=_check_options,
    driver=_driver,
    lineage_namespace=metastore_namespace,
)
