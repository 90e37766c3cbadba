"""What a Spark session needs before any Delta catalog call: Delta's session catalog and SQL
extension, and (outside Spark Connect) the Delta runtime on the driver's classpath."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.delta.strategy import DELTA_CATALOG_CLASS
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.spark.engine import is_connect
from airflow_provider_ctas.spark.runtime import require_runtime

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXTENSION_CLASS = "io.delta.sql.DeltaSparkSessionExtension"


def delta_conf_problem(catalog: str | None, extensions: str | None, where: str = "the operator's conf") -> str | None:
    """What is wrong with a session's Delta settings (the session catalog and the SQL extension), with the fix."""
    fix = (
        f"set spark.sql.catalog.spark_catalog={DELTA_CATALOG_CLASS} and spark.sql.extensions={EXTENSION_CLASS} "
        f"in {where}"
    )
    if catalog != DELTA_CATALOG_CLASS:
        return f"Spark's session catalog is {catalog or 'the built-in one'}, not Delta's: {fix}"
    if EXTENSION_CLASS not in (extensions or "").split(","):
        return f"Delta's SQL extension is not enabled: {fix}"
    return None


def check_delta_catalog(spark: SparkSession) -> None:
    """Refuse, with the fix, a session whose session catalog is not Delta's, or whose driver lacks
    the Delta runtime; before any catalog call (a missing catalog class fails at first use). Over
    Spark Connect these are the server's settings, and its classpath is out of a client's reach."""
    catalog = spark.conf.get("spark.sql.catalog.spark_catalog", None)
    if catalog == DELTA_CATALOG_CLASS and not is_connect(spark):
        require_runtime(
            spark, DELTA_CATALOG_CLASS, "Delta", "the jars delta-spark_<spark minor>_2.13 and delta-storage"
        )
    where = "the Spark Connect server's configuration" if is_connect(spark) else "the operator's conf"
    problem = delta_conf_problem(catalog, spark.conf.get("spark.sql.extensions", None), where)
    if problem is not None:
        raise InvalidInputError(problem)
