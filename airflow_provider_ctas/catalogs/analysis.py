"""Analysing the user's query in the driver, before any data is written (no Spark job runs): its
schema, and what its plan reads for lineage. Shared by every strategy's begin."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.core.errors import InvalidInputError, QueryError
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Engine, Reporter


class QueryAnalysis:
    """The query analysed on a thread of its own while begin reads the catalog: both mostly wait on
    a fresh driver JVM's first use of a code path (reading an existing table's entry, resolving the
    query), about half a second each (docs/profile.md), and the JVM serves them at once.

    Use as a context manager around the catalog reads: leaving it waits for the analysis, so none
    runs on after begin; a begin that stops early (nothing to do, a refused target) never sees the
    analysis's outcome, as if the query had not been analysed.
    """

    def __init__(self, spark: SparkSession, sql: str | None) -> None:
        if sql is None:
            raise InvalidInputError("no SQL was sent for this transaction")
        self._spark, self._sql = spark, sql
        self._outcome: tuple[DataFrame, StructType] | BaseException | None = None
        self._thread = threading.Thread(target=self._analyse, name="airflow-ctas-analyse", daemon=True)

    def __enter__(self) -> QueryAnalysis:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._thread.join()

    def _analyse(self) -> None:
        try:
            frame = self._spark.sql(as_subquery(self._sql))
            self._outcome = (frame, frame.schema)
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that asks for the result
            self._outcome = exc

    def result(self, engine: Engine, log: Reporter, details: dict[str, Any]) -> StructType:
        """The query's schema; a query that does not analyse is ``QUERY_ERROR`` (not retried).
        What the analysed plan reads goes to ``details["inputs"]``."""
        from pyspark.errors import AnalysisException, ParseException

        self._thread.join()
        outcome = self._outcome
        if isinstance(outcome, (ParseException, AnalysisException)):
            raise QueryError(f"the SELECT is not a valid query: {first_line(outcome)}") from outcome
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is None:
            raise RuntimeError("the query analysis has not run")
        frame, schema = outcome
        if (inputs := lineage_inputs(engine, frame, log)) is not None:
            details["inputs"] = inputs  # for lineage: what the analysed plan reads
        return schema


def describe_schema(schema: StructType, details: dict[str, Any]) -> None:
    """The new version's columns, as the XCom and the lineage schema facet report them."""
    details["columns"] = [f.name for f in schema.fields]
    details["schema"] = [{"name": f.name, "type": f.dataType.simpleString()} for f in schema.fields]


def lineage_inputs(engine: Engine, frame: DataFrame, log: Reporter) -> list[str] | None:
    """What the analysed plan reads, or None: lineage is a by-product, so walking Spark internals
    that changed under us costs the lineage (the operator falls back to parsing the SQL), never the run."""
    try:
        return engine.input_tables(frame)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning(f"lineage: could not read the query's input tables from its plan: {first_line(exc)}")
        return None
