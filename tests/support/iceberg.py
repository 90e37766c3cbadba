"""Iceberg for the tests: the runtime jar, the catalog conf a task needs, and an independent reader
(``table_reader.py``) that also reads Iceberg's metadata tables.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctas_devstack.metastore import HiveMetastore
from tests.support.table_reader import SPARK_FOR_FORMATS, TableReader

SPARK_FOR_ICEBERG = SPARK_FOR_FORMATS
ICEBERG_RUNTIME = "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0"
CATALOG = "ice"


def iceberg_jar() -> str:
    return locked_jars(ICEBERG_RUNTIME)


def locked_jars(*prefixes: str) -> str:
    """The local paths (comma-separated, as ``spark.jars`` takes them) of the locked jars whose
    coordinates start with one of ``prefixes``."""
    return subprocess.run(
        [sys.executable, "scripts/fetch_jars.py", "--select", *prefixes], capture_output=True, text=True, check=True
    ).stdout.strip()


def iceberg_conf(metastore: HiveMetastore) -> dict[str, str]:
    """What a task's conf says for an Iceberg catalog on the tests' metastore service, on Spark 4.1."""
    prefix = f"spark.sql.catalog.{CATALOG}"
    return {
        "spark.jars": iceberg_jar(),
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hive",
        f"{prefix}.uri": metastore.uri,
        f"{prefix}.warehouse": metastore.warehouse.as_uri(),
        # pyspark's own metastore service has no ACID lock tables: Iceberg then commits with the
        # metastore's expected-parameter alter_table (Hive 2.3.10), still a compare-and-swap.
        "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
    }


class IcebergReader(TableReader):
    def __init__(self, metastore: HiveMetastore, log: Path) -> None:
        # Without Spark's table cache: each read sees what the metastore says now.
        super().__init__({**iceberg_conf(metastore), f"spark.sql.catalog.{CATALOG}.cache-enabled": "false"}, log)

    def branches(self, table: str) -> list[str]:
        return sorted(row[0] for row in self.rows(f"SELECT name FROM {table}.refs WHERE type = 'BRANCH'"))

    def current_summary(self, table: str) -> dict[str, str]:
        """The snapshot summary of ``main``'s current snapshot."""
        self.rows(f"REFRESH TABLE {table}")
        rows = self.rows(
            f"SELECT s.summary FROM {table}.snapshots s JOIN {table}.refs r ON s.snapshot_id = r.snapshot_id "
            "WHERE r.name = 'main'"
        )
        return dict(rows[0][0]) if rows else {}
