"""The Iceberg strategy as the registry sees it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg.group_table import IcebergGroup
from airflow_provider_ctas.catalogs.iceberg.table import FORMAT, IcebergTable
from airflow_provider_ctas.catalogs.metastore.namespace import (
    GLUE_ARN,
    METASTORE_URIS,
    metastore_namespace,
    service_namespace,
)
from airflow_provider_ctas.catalogs.strategy import RequestSpec, Strategy
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.transaction import TwoPhaseTable

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.strategy import DriverSide

SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"


def _driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.iceberg.driver import IcebergDriver

    return IcebergDriver()


def _group_driver() -> DriverSide:
    from airflow_provider_ctas.catalogs.iceberg.driver import IcebergGroupDriver

    return IcebergGroupDriver()


def _not_a_request(spec: RequestSpec) -> TwoPhaseTable:
    raise InvalidInputError("a publish group is built by PublishGroupOperator from its members, not from a request")


def _no_options(mode: str, table_format: str, superseded_retention: object) -> None:
    raise InvalidInputError("a publish group has no table format of its own")


def lineage_namespace(conf: Mapping[str, Any] | None, details: Mapping[str, Any] | None = None) -> str | None:
    """The Iceberg catalog: the one the driver reported, else the only Iceberg catalog's ``uri`` in
    the operator's conf, else the Hadoop ``hive.metastore.uris`` it falls back to. A Hive metastore
    is ``hive://host:port``; a REST catalog is named by its URL (``http(s)://host:port/path``); a
    Glue Data Catalog by ``arn:aws:glue:<region>:<account>``, which the conf names only with
    ``glue.id`` and ``client.region`` (else None: the driver asks Glue)."""
    reported = (details or {}).get("metastore_uris")
    if isinstance(reported, str):
        if reported.startswith(GLUE_ARN):
            return reported
        return service_namespace(reported) or metastore_namespace(None, details)
    conf = dict(conf or {})
    catalogs = [key for key, value in conf.items() if value == SPARK_CATALOG_CLASS and key.count(".") == 3]
    glue = [key for key in catalogs if conf.get(f"{key}.type") == "glue"]
    if glue:
        region, account = conf.get(f"{glue[0]}.client.region"), conf.get(f"{glue[0]}.glue.id")
        return f"{GLUE_ARN}{region}:{account}" if len(catalogs) == 1 and region and account else None
    uris = {str(conf[f"{key}.uri"]) for key in catalogs if conf.get(f"{key}.uri")}
    if len(uris) == 1:
        uri = uris.pop()
        return service_namespace(uri) or metastore_namespace({METASTORE_URIS: uri}, None)
    return metastore_namespace(conf, None)


STRATEGY = Strategy(
    kind=IcebergTable.kind,
    formats=frozenset({FORMAT}),
    catalogs=frozenset({SPARK_CATALOG_CLASS}),
    validate=IcebergTable.from_request,
    validate_target=IcebergTable.parse_target,
    check_options=IcebergTable.check_options,
    driver=_driver,
    lineage_namespace=lineage_namespace,
    gc_scope="named",
    groups=True,
    durable=True,
)

GROUP_STRATEGY = Strategy(
    kind=IcebergGroup.kind,
    formats=frozenset(),
    catalogs=frozenset({SPARK_CATALOG_CLASS}),
    validate=_not_a_request,
    validate_target=IcebergTable.parse_target,
    check_options=_no_options,
    driver=_group_driver,
    lineage_namespace=lineage_namespace,
    audits=False,
)
"""Several Iceberg tables published in one REST catalog commit (``group.py``); no format selects it."""
