"""Refuses a worker whose pip-installed pyspark had its Python files overwritten.

The apache-spark provider requires ``pyspark-client`` (the Spark Connect client), which installs into
the same ``pyspark`` folder as ``pyspark`` itself. Installed with plain pip next to pyspark of another
version (``airflow-provider-ctas[spark-submit]``: pyspark 4.3, pyspark-client 4.2), whichever pip
installs last wins, file by file: a spark-submit driver in client mode would then run one Spark
release's Python against another's jars. Found before any spark-submit, with the command that fixes it.
"""

from __future__ import annotations

import re
from importlib import metadata

from airflow_provider_ctas.core.errors import SparkInstallError

_VERSION = re.compile(r"""^__version__(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def files_version(dist: metadata.Distribution) -> str | None:
    """The version the installed ``pyspark/version.py`` declares (read, not imported)."""
    try:
        text = dist.locate_file("pyspark/version.py").read_text()
    except OSError:
        return None
    found = _VERSION.search(text)
    return found.group(1) if found else None


def check_pyspark_install(dist: metadata.Distribution | None = None) -> None:
    if dist is None:
        try:
            dist = metadata.distribution("pyspark")
        except metadata.PackageNotFoundError:
            return  # spark-submit comes from a Spark installation (SPARK_HOME / PATH), not from pip
    declared = files_version(dist)
    if declared is not None and declared != dist.version:
        raise SparkInstallError(
            f"pyspark {dist.version} is installed, but its Python files are those of {declared} "
            f"(pyspark-client {declared}, which the apache-spark provider requires, installs into the same "
            f"folder and overwrote them); restore them with: "
            f"pip install --force-reinstall --no-deps 'pyspark=={dist.version}'"
        )
