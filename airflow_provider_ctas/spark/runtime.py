"""Which Spark releases the phases run on, checked where they run (the driver, or a Connect server).

The phases call Spark's catalog through py4j (``engine.py``): what they use exists from Spark 3.5 on,
in its Scala 2.12 and 2.13 builds alike. An older (or a future major) release would fail half-way
with an obscure py4j error, so it is refused before any Spark work with a message that says what is
supported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core.errors import InvalidInputError, UnsupportedSparkError
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OLDEST_SPARK = (3, 5)
NEXT_UNSUPPORTED_MAJOR = 5
TESTED_SPARK = ("3.5", "4.0", "4.1", "4.3")
"""Releases CI runs the provider on: 4.3 the whole suite, 3.5, 4.0 and 4.1 a lifecycle smoke (and
3.5 a fault cell), each through its own spark-submit and Python."""


def check_spark(spark_version: str) -> str | None:
    """Raise for a release the phases cannot run on; return a warning for one that is untested."""
    numbers = spark_version.split("-", 1)[0].split(".")
    try:
        major, minor = int(numbers[0]), int(numbers[1])
    except (IndexError, ValueError):
        return f"Spark version {spark_version!r} not understood; assuming it is supported"
    if (major, minor) < OLDEST_SPARK or major >= NEXT_UNSUPPORTED_MAJOR:
        raise UnsupportedSparkError(
            f"Spark {spark_version} is not supported: airflow-provider-ctas runs on Spark 3.5 and 4.x "
            f"(tested: {', '.join(TESTED_SPARK)}); run the task on a cluster or distribution of one of those"
        )
    if f"{major}.{minor}" not in TESTED_SPARK:
        return f"Spark {spark_version} is untested with this release (tested: {', '.join(TESTED_SPARK)})"
    return None


def require_runtime(spark: SparkSession, class_name: str, runtime: str, jars: str) -> None:
    """Refuse, with the jars to add, a classic driver that lacks a table format's runtime: before any
    catalog call, since a catalog whose class is missing fails only at its first use."""
    session: Any = spark  # py4j handles are private attributes of a classic session
    try:
        session._jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(class_name)
    except Exception as exc:
        raise InvalidInputError(
            f"the {runtime} runtime is not on the driver's classpath ({first_line(exc)}): add {jars} "
            f"matching Spark {spark.version} to spark.jars"
        ) from exc
