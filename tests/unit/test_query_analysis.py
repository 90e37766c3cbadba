"""The query is analysed while begin reads the catalog; its outcome reaches begin only when asked."""

import threading
from typing import Any, cast

import pytest
from pyspark.errors import AnalysisException

from airflow_provider_ctas.catalogs.analysis import QueryAnalysis
from airflow_provider_ctas.core.errors import InvalidInputError, QueryError


class _Frame:
    schema = "struct<a:bigint>"


class _Spark:
    """``sql`` waits until begin's catalog read has started, as the JVM would serve both at once."""

    def __init__(self, outcome: object = None) -> None:
        self.catalog_read = threading.Event()
        self.outcome = outcome
        self.statements: list[str] = []

    def sql(self, statement: str) -> _Frame:
        self.statements.append(statement)
        if not self.catalog_read.wait(timeout=10):
            raise TimeoutError("the analysis ran before the catalog read, not beside it")
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return _Frame()


class _Engine:
    def input_tables(self, frame: object) -> list[str]:
        return ["spark_catalog.raw.orders"]


class _Log:
    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        pass


def _analyse(spark: _Spark) -> tuple[object, dict[str, Any]]:
    details: dict[str, Any] = {}
    with QueryAnalysis(cast(Any, spark), "SELECT 1 AS a") as analysis:
        spark.catalog_read.set()  # begin reads the target here
        return analysis.result(cast(Any, _Engine()), _Log(), details), details


def test_the_query_is_analysed_beside_the_catalog_read() -> None:
    spark = _Spark()
    schema, details = _analyse(spark)
    assert schema == "struct<a:bigint>"
    assert details == {"inputs": ["spark_catalog.raw.orders"]}
    assert spark.statements == ["SELECT * FROM (\nSELECT 1 AS a\n) AS __ctas_source"]


def test_a_query_that_does_not_analyse_is_a_query_error() -> None:
    spark = _Spark(AnalysisException(message="[TABLE_OR_VIEW_NOT_FOUND] The table `nope` cannot be found."))
    with pytest.raises(QueryError, match=r"not a valid query: .*TABLE_OR_VIEW_NOT_FOUND"):
        _analyse(spark)


def test_other_failures_reach_begin_as_they_are() -> None:
    with pytest.raises(ConnectionError, match="gateway gone"):
        _analyse(_Spark(ConnectionError("gateway gone")))


def test_a_begin_that_stops_early_waits_for_the_analysis_and_never_sees_its_error() -> None:
    spark = _Spark(AnalysisException(message="broken"))
    analysis = QueryAnalysis(cast(Any, spark), "SELECT broken")
    with analysis:
        spark.catalog_read.set()  # e.g. the target exists and mode is create_if_not_exists: begin returns
    assert not analysis._thread.is_alive()


def test_no_sql_is_refused_before_any_thread_starts() -> None:
    with pytest.raises(InvalidInputError, match="no SQL"):
        QueryAnalysis(cast(Any, _Spark()), None)
