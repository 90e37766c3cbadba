"""Which Spark runtimes the phases run on, checked where they run (the driver, or a Connect server).

The phases use Spark 4's catalog and Scala 2.13 interfaces through py4j (``engine.py``) and Python
3.11 syntax; an older runtime would fail half-way with an obscure py4j or syntax error, so it is
refused before any Spark work with a message that says what is supported.
"""

from __future__ import annotations

from airflow_provider_ctas.core.errors import UnsupportedSparkError

SUPPORTED_SPARK_MAJOR = 4
TESTED_SPARK = ("4.1", "4.3")
"""Releases CI runs the provider on: 4.3 the whole suite, 4.1 a lifecycle smoke and a fault cell."""
SCALA = "2.13"


def check_spark(spark_version: str, scala_version: str | None) -> str | None:
    """Raise for a runtime the phases cannot run on; return a warning for one that is untested."""
    release = spark_version.split("-", 1)[0]
    major, _, rest = release.partition(".")
    if not major.isdigit() or int(major) != SUPPORTED_SPARK_MAJOR:
        raise UnsupportedSparkError(
            f"Spark {spark_version} is not supported: airflow-provider-ctas runs on Spark 4.x with Scala "
            f"{SCALA} (tested: {', '.join(TESTED_SPARK)}); run the task on a Spark 4 cluster or distribution"
        )
    if scala_version is not None and not scala_version.startswith(SCALA + "."):
        raise UnsupportedSparkError(
            f"Spark {spark_version} built for Scala {scala_version} is not supported: the phases need "
            f"Spark's Scala {SCALA} build"
        )
    minor = rest.split(".", 1)[0]
    if f"{major}.{minor}" not in TESTED_SPARK:
        return f"Spark {spark_version} is untested with this release (tested: {', '.join(TESTED_SPARK)})"
    return None
