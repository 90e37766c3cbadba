"""OpenLineage facets for AtomicCtasOperator (used only when the OpenLineage provider is installed).

Output: the published table, with its schema and, on completion, its row count and size. Inputs:
the tables the SELECT reads, from the SQL parser Airflow's OpenLineage integration uses. Staging
tables never appear. Table datasets live in the metastore's namespace, ``hive://host:port`` from
``spark.hadoop.hive.metastore.uris`` (the operator's ``conf``, then SPARK_CONF_DIR), as in
OpenLineage's naming spec; with Spark's embedded metastore it is ``hive://embedded``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from airflow_provider_ctas.core.identifiers import DEFAULT_DATABASE

METASTORE_URIS = "spark.hadoop.hive.metastore.uris"


def metastore_namespace(conf: Mapping[str, Any] | None) -> str:
    uris = (conf or {}).get(METASTORE_URIS)
    if not uris and (conf_dir := os.environ.get("SPARK_CONF_DIR")):
        defaults = Path(conf_dir, "spark-defaults.conf")
        if defaults.exists():
            for line in defaults.read_text().splitlines():
                key, _, value = line.strip().partition(" ")
                if key == METASTORE_URIS:
                    uris = value.strip()
    if not uris:
        return "hive://embedded"
    first = urlparse(str(uris).split(",")[0].strip())
    return f"hive://{first.hostname}:{first.port or 9083}"


def input_tables(sql: str) -> list[str]:
    """``database.table`` for every table the query reads (unqualified names are in ``default``)."""
    from airflow.providers.openlineage.sqlparser import SQLParser

    meta = SQLParser(dialect="spark", default_schema=DEFAULT_DATABASE).parse(sql)
    if meta is None:
        return []
    names = []
    for table in meta.in_tables:
        database = (table.schema or DEFAULT_DATABASE).lower()
        names.append(f"{database}.{table.name.lower()}")
    return sorted(set(names))


def lineage(
    *, sql: str, target: str, conf: Mapping[str, Any] | None, details: Mapping[str, Any] | None, complete: bool
) -> Any:
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    namespace = metastore_namespace(conf)
    details = details or {}
    facets: dict[str, Any] = {}
    if details.get("schema"):
        facets["schema"] = SchemaDatasetFacet(
            fields=[SchemaDatasetFacetFields(name=f["name"], type=f["type"]) for f in details["schema"]]
        )
    output_facets: dict[str, Any] = {}
    if complete and details.get("row_count") is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=int(details["row_count"]), size=details.get("bytes")
        )
    database, table = target.split(".")[-2:]
    return OperatorLineage(
        inputs=[Dataset(namespace=namespace, name=name) for name in input_tables(sql)],
        outputs=[
            OutputDataset(namespace=namespace, name=f"{database}.{table}", facets=facets, outputFacets=output_facets)
        ],
    )
