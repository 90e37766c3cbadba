"""Other Spark releases for the compatibility tests, each a pyspark in its own venv beside the main
environment (never in it): its ``bin/spark-submit``, jars and Python are what a cluster on that
release would run. Made once per machine (pip, ~1 min), kept in a cache, under a lock."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.jvm import SparkInstall, compile_pyspark, ensure_archive, with_archive

SPARK_FOR_FORMATS = "4.1.4"
"""The newest Spark that both the Iceberg 1.11 and the Delta 4.4 runtimes support."""
CACHE = Path(os.environ.get("CTAS_PYSPARK_CACHE", Path.home() / ".cache" / "airflow-provider-ctas" / "pyspark"))


def pyspark_venv(version: str) -> Path:
    """A venv with exactly ``pyspark==version`` (its Python is this interpreter's version)."""
    venv = CACHE / version
    done = venv / ".installed"
    if done.exists():
        return venv
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 f"pyspark=={version}"],
                check=True,
                timeout=1200,
            )  # fmt: skip
            done.write_text(version)
    return venv


def on_release(version: str, *, archive: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """The environment and conf that make a task's spark-submit and driver that release's.

    ``archive``: its JVMs get a class-data-sharing archive of that release's classes
    (tests/support/jvm.py); making one costs ~35 s once, worth it for a release many tests start.
    Otherwise they start without one (the main archive serves the main pyspark only)."""
    venv = pyspark_venv(version)
    python = str(venv / "bin" / "python")
    spark, made = SparkInstall.of_venv(venv), None
    if archive:
        made = ensure_archive(os.environ.get("SPARK_DIST_CLASSPATH", ""), spark)  # compiles pyspark too
    else:
        compile_pyspark(spark)
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "SPARK_SUBMIT_OPTS": with_archive(os.environ.get("SPARK_SUBMIT_OPTS", ""), made),
    }
    return env, {"spark.pyspark.python": python, "spark.pyspark.driver.python": python}
