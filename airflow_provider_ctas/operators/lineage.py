"""OpenLineage facets for AtomicCtasOperator (used only when the OpenLineage provider is installed).

Output: the published table, with its schema, storage layer and location and, on completion, its
row count and size, the version the publish made and whether it created or overwrote it. Inputs:
the catalog tables the driver's analysed plan read (before the driver ran, and over Spark Connect,
the tables the SQL parser Airflow's OpenLineage integration finds). Job: the SQL. Staging
tables never appear. Table datasets live in the namespace the table's strategy names
(for the session catalog, the metastore's: ``hive://host:port``, or ``hive://embedded``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_ctas.core.identifiers import DEFAULT_DATABASE
from airflow_provider_ctas.core.transaction import TwoPhaseTable


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
    *,
    namespace: str,
    sql: str,
    target: str,
    details: Mapping[str, Any] | None,
    complete: bool,
    table_format: str | None = None,
    outcome: str | None = None,
) -> Any:
    """``outcome``: the transaction's (``published``, ``already_published``, ...); only a run that
    published says how it changed the table and which version it made."""
    from airflow.providers.common.compat.openlineage.facet import (
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
        SQLJobFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_ctas.catalogs.metastore.namespace import dataset_name

    details = details or {}
    facets: dict[str, Any] = {}
    if details.get("schema"):
        facets["schema"] = SchemaDatasetFacet(
            fields=[SchemaDatasetFacetFields(name=f["name"], type=f["type"]) for f in details["schema"]]
        )
    if details.get("checks"):  # on failure too: the assertions say why nothing was published
        facets["dataQualityAssertions"] = _assertions(details["checks"])
    facets.update(_table_facets(details, table_format, published=complete and outcome == "published"))
    output_facets: dict[str, Any] = {}
    if complete and details.get("row_count") is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=int(details["row_count"]), size=details.get("bytes")
        )
    database, table = target.split(".")[-2:]
    # What the driver's analysed plan read, once it ran (Spark Connect: the SQL parsed here).
    inputs = details["inputs"] if isinstance(details.get("inputs"), list) else input_tables(sql)
    datasets = [_input(namespace, entry) for entry in inputs]
    if isinstance(details.get("column_lineage"), Mapping) and datasets:
        facets["columnLineage"] = _column_lineage(details["column_lineage"], datasets)
    return OperatorLineage(
        inputs=datasets,
        outputs=[
            OutputDataset(
                namespace=namespace,
                name=dataset_name(namespace, database, table),
                facets=facets,
                outputFacets=output_facets,
            )
        ],
        job_facets={"sql": SQLJobFacet(query=sql)},
    )


def _table_facets(details: Mapping[str, Any], table_format: str | None, *, published: bool) -> dict[str, Any]:
    """OpenLineage's standard facets where the run knows their data: the format's storage layer,
    the table's location (a symlink, as OpenLineage names files, so events that name the table by
    its files join this one), and, for a run that published, the version it made and how it
    changed the table (a create publishes by a rename; every other publish replaces data)."""
    from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
    from openlineage.client.generated.lifecycle_state_change_dataset import (
        LifecycleStateChange,
        LifecycleStateChangeDatasetFacet,
    )
    from openlineage.client.generated.storage_dataset import StorageDatasetFacet
    from openlineage.client.generated.symlinks_dataset import Identifier, SymlinksDatasetFacet

    from airflow_provider_ctas.catalogs.metastore.namespace import path_dataset

    facets: dict[str, Any] = {}
    if table_format in ("iceberg", "delta"):
        facets["storage"] = StorageDatasetFacet(storageLayer=table_format)
    if details.get("location"):
        namespace, name = path_dataset(str(details["location"]))
        facets["symlinks"] = SymlinksDatasetFacet(identifiers=[Identifier(namespace, name, "LOCATION")])
    if not published:
        return facets
    version = details.get("snapshot_id") if table_format == "iceberg" else details.get("delta_version")
    if version is not None:
        facets["version"] = DatasetVersionDatasetFacet(datasetVersion=str(version))
    created = (details.get("publish") or {}).get("mechanism") == "rename"
    change = LifecycleStateChange.CREATE if created else LifecycleStateChange.OVERWRITE
    facets["lifecycleStateChange"] = LifecycleStateChangeDatasetFacet(lifecycleStateChange=change)
    return facets


def _input(namespace: str, entry: Any) -> Any:
    """An input as the driver reported it: ``database.table`` in the output's metastore, or a table
    of another catalog with its own namespace."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    from airflow_provider_ctas.catalogs.metastore.namespace import dataset_name

    if isinstance(entry, dict):
        return Dataset(namespace=str(entry["namespace"]), name=str(entry["name"]))
    database, _, table = str(entry).rpartition(".")
    return Dataset(namespace=namespace, name=dataset_name(namespace, database, table) if database else table)


def _column_lineage(columns: Mapping[str, Any], inputs: list[Any]) -> Any:
    """The driver's column lineage (input index, column, subtype) as OpenLineage's facet: each
    output column's DIRECT dependencies; a column computed from no input column (a literal,
    ``range``) has none and is left out."""
    from openlineage.client.generated.column_lineage_dataset import (
        ColumnLineageDatasetFacet,
        Fields,
        InputField,
        Transformation,
    )

    fields = {}
    for column, sources in columns.items():
        used = [
            InputField(
                namespace=inputs[index].namespace,
                name=inputs[index].name,
                field=str(field),
                transformations=[Transformation(type="DIRECT", subtype=str(subtype))],
            )
            for index, field, subtype in sources
            if isinstance(index, int) and 0 <= index < len(inputs)
        ]
        if used:
            fields[str(column)] = Fields(inputFields=used)
    return ColumnLineageDatasetFacet(fields=fields)


def _assertions(checks: list[dict[str, Any]]) -> Any:
    """The audit's results as OpenLineage assertions, on the output they were evaluated for."""
    from openlineage.client.generated.data_quality_assertions_dataset import (
        Assertion,
        DataQualityAssertionsDatasetFacet,
    )

    return DataQualityAssertionsDatasetFacet(
        assertions=[
            Assertion(
                assertion=str(c["type"]),
                success=bool(c["passed"]),
                name=str(c["name"]),
                severity="error",
                expected=str(c["expected"]),
                actual=str(c["value"]),
            )
            for c in checks
        ]
    )


class CtasLineageMixin:
    """The operator's OpenLineage methods: the published table in its strategy's namespace."""

    sql: str
    target_table: str
    table_format: str
    conf: Mapping[str, Any] | None
    _txn: TwoPhaseTable | None

    def _lineage(self, *, complete: bool) -> Any:
        from airflow_provider_ctas.catalogs import strategy_for

        table = self._txn
        strategy = strategy_for(self.table_format)
        namespace = strategy.lineage_namespace(self.conf, table.details if table else None)
        if namespace is None:  # only the driver can name the catalog, and it has not run yet
            from airflow.providers.openlineage.extractors import OperatorLineage

            return OperatorLineage()
        return lineage(
            namespace=namespace,
            sql=self.sql,
            target=str(table.target) if table else str(strategy.validate_target(self.target_table)),
            details=table.details if table else None,
            complete=complete,
            table_format=self.table_format,
            outcome=str(table.outcome) if table and table.outcome else None,
        )

    def get_openlineage_facets_on_start(self) -> Any:
        return self._lineage(complete=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._lineage(complete=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self._lineage(complete=False)
