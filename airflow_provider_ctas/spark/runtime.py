"""Which Spark releases the phases run on, checked where they run (the driver, or a Connect server).

The phases call Spark's catalog through py4j (``engine.py``): what they use exists from Spark 3.5 on,
in its Scala 2.12 and 2.13 builds alike. An older (or a future major) release would fail half-way
with an obscure py4j error, so it is refused before any Spark work with a message that says what is
supported.
"""

from __future__ import annotations

from airflow_provider_ctas.core.errors import UnsupportedSparkError

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
