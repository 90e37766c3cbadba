"""Delta for the tests: the runtime jars, the conf a task needs (Delta's catalog as Spark's session
catalog, on the tests' metastore service) and an independent reader (``table_reader.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_ctas.catalogs.delta.session import EXTENSION_CLASS
from airflow_provider_ctas.catalogs.delta.strategy import DELTA_CATALOG_CLASS
from ctas_devstack.jars import locked_jars
from tests.support.table_reader import TableReader

DELTA_JARS = ("io.delta:delta-spark_4.1_2.13", "io.delta:delta-storage")


def delta_jars() -> str:
    return ",".join(locked_jars(*DELTA_JARS))


def delta_conf() -> dict[str, str]:
    """What a task's conf says for Delta tables in the session catalog, on Spark 4.1. Delta rebuilds
    a table's state from its log in ``snapshotPartitions`` tasks (50 by default): on local[2] with
    tables of a few files that was most of a Delta test's time (a fence and a commit took ~50 s)."""
    return {
        "spark.jars": delta_jars(),
        "spark.sql.extensions": EXTENSION_CLASS,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG_CLASS,
        "spark.databricks.delta.snapshotPartitions": "2",
    }


class DeltaReader(TableReader):
    def __init__(self, log: Path) -> None:
        super().__init__(delta_conf(), log)

    def staging_tables(self, database: str) -> list[str]:
        return [row[1] for row in self.rows(f"SHOW TABLES IN {database}") if row[1].startswith("__ctas_")]

    def history(self, table: str) -> list[dict[str, Any]]:
        """Newest first: version, operation, userMetadata."""
        return [
            {key: row[key] for key in ("version", "operation", "userMetadata")}
            for row in self.records(f"DESCRIBE HISTORY {table}")
        ]
