"""Analysing the user's query in the driver, before any data is written (no Spark job runs): its
schema, and what its plan reads for lineage. Shared by every strategy's begin."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.metastore.namespace import catalog_namespace, jdbc_dataset, path_dataset
from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import InvalidInputError, QueryError
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Engine, Reporter


def analyse_query(spark: SparkSession, sql: str | None, engine: Engine, log: Reporter, details: Details) -> StructType:
    """The query's schema; a query that does not analyse is ``QUERY_ERROR`` (not retried).
    What the analysed plan reads goes to ``details["inputs"]``."""
    from pyspark.errors import AnalysisException, ParseException

    if sql is None:
        raise InvalidInputError("no SQL was sent for this transaction")
    try:
        frame = spark.sql(as_subquery(sql))
        schema = frame.schema
    except (ParseException, AnalysisException) as exc:
        raise QueryError(f"the SELECT is not a valid query: {first_line(exc)}") from exc
    if (inputs := lineage_inputs(engine, frame, log)) is not None:
        details["inputs"] = inputs  # for lineage: what the analysed plan reads
        if (columns := lineage_columns(engine, frame, log)) is not None:
            details["column_lineage"] = columns
    return schema


def describe_schema(schema: StructType, details: Details) -> None:
    """The new version's columns, as the XCom and the lineage schema facet report them."""
    details["columns"] = [f.name for f in schema.fields]
    details["schema"] = [{"name": f.name, "type": f.dataType.simpleString()} for f in schema.fields]


def lineage_inputs(engine: Engine, frame: DataFrame, log: Reporter) -> list[Any] | None:
    """What the analysed plan reads, or None: lineage is a by-product, so walking Spark internals
    that changed under us costs the lineage (the operator falls back to parsing the SQL), never the run.

    A session-catalog table is ``database.table`` (the output's metastore); another catalog's table
    or a path read is ``{"namespace": ..., "name": ...}``, named after that catalog's service or
    metastore, or as OpenLineage names files."""
    try:
        inputs = engine.input_tables(frame)
        if inputs is None or all(isinstance(i, str) for i in inputs):
            return inputs
        settings = dict(frame.sparkSession.sparkContext.getConf().getAll())
        settings.update(getattr(frame.sparkSession.conf, "getAll", None) or {})
        return [_named(i, settings) for i in inputs]
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning(f"lineage: could not read the query's input tables from its plan: {first_line(exc)}")
        return None


def lineage_columns(engine: Engine, frame: DataFrame, log: Reporter) -> dict[str, list[list[Any]]] | None:
    """Per output column, ``[input index, column, subtype]`` of the inputs (in ``inputs``' order)
    its values come from; None when the plan cannot be read (as for the inputs)."""
    try:
        started = time.monotonic()
        columns = engine.column_lineage(frame)
        if columns is not None:
            seconds = time.monotonic() - started
            log.info(f"lineage: the inputs of {len(columns)} column(s) read from the plan in {seconds:.3f}s")
        return columns
    except Exception as exc:  # noqa: BLE001 - as lineage_inputs
        log.warning(f"lineage: could not read the query's column lineage from its plan: {first_line(exc)}")
        return None


def _named(entry: str | dict[str, str], settings: dict[str, str]) -> Any:
    if isinstance(entry, str):
        return entry
    if "path" in entry:
        namespace, name = path_dataset(entry["path"])
        return {"namespace": namespace, "name": name}
    if "jdbc" in entry:
        namespace, name = jdbc_dataset(entry["jdbc"], entry["table"])
        return {"namespace": namespace, "name": name}
    return {"namespace": catalog_namespace(settings, entry["catalog"]), "name": entry["name"]}
