"""Iceberg for the tests: the runtime jar, the catalog conf a task needs, and an independent reader
(``table_reader.py``) that also reads Iceberg's metadata tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.iceberg.fence import FENCE_PREFIX, LEGACY_BEGUN_PREFIX, PREPARED_PREFIX
from ctas_devstack.jars import locked_jars
from ctas_devstack.metastore import HiveMetastore
from tests.support.dags import make_dag, run_dag, xcom_value
from tests.support.format_scenarios import FormatProbe
from tests.support.spark_versions import SPARK_FOR_FORMATS, on_release
from tests.support.table_reader import TableReader

SPARK_FOR_ICEBERG = SPARK_FOR_FORMATS
ICEBERG_RUNTIME = "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0"
CATALOG = "ice"


def iceberg_jar() -> str:
    return spark_jars(ICEBERG_RUNTIME)


def spark_jars(*prefixes: str) -> str:
    """The locked jars whose coordinates start with one of ``prefixes``, as ``spark.jars`` takes them."""
    return ",".join(locked_jars(*prefixes))


def task_conf_on_spark41(monkeypatch: pytest.MonkeyPatch, catalog_conf: dict[str, str]) -> dict[str, str]:
    """A task's conf for an Iceberg catalog (``catalog_conf``); its spark-submit and driver are Spark 4.1's."""
    env, conf = on_release(SPARK_FOR_ICEBERG, archive=True)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {**conf, **catalog_conf}


def iceberg_ctas(dag_id: str, conf: dict[str, str], **kwargs: Any) -> tuple[str, dict[str, Any]]:
    """One run of an Iceberg CTAS DAG: the task's state and its XCom transaction."""
    run = run_dag(make_dag(dag_id, conf=conf, table_format="iceberg", **kwargs))
    return run.task_state, xcom_value(dag_id, run.run_id, "ctas_transaction") or {}


def assert_reshaped(reader: TableReader, dag_id: str, conf: dict[str, str], namespace: str, table: str) -> None:
    """A ``replace`` of ``table`` (an ``id`` column of longs, unpartitioned) that changes ``id`` to a
    string and partitions by ``bucket(4, id)``: published in one commit of the catalog, the old
    version still readable in its own schema, nothing left."""
    before = reader.value(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'")
    rows_before = reader.value(f"SELECT count(*) FROM {table}")
    state, txn = iceberg_ctas(dag_id, conf, target_table=table, mode="replace", partition_by=["bucket(4, id)"],
                              sql="SELECT CAST(id AS STRING) AS id FROM range(8)")  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "reshape"
    assert reader.rows(f"SELECT typeof(id), count(*) FROM {table} GROUP BY 1") == [["string", 8]]
    assert [r[1] for r in reader.rows(f"DESCRIBE TABLE {table}") if str(r[0]).startswith("Part ")] == ["bucket(4, id)"]
    assert reader.rows(f"SELECT typeof(id), count(*) FROM {table} VERSION AS OF {before} GROUP BY 1") == [
        ["bigint", rows_before]
    ], "the replaced version, in its own schema"
    assert leftovers(reader, namespace, table) == []


def leftovers(reader: TableReader, namespace: str, table: str) -> list[str]:
    """Staging tables in ``namespace`` (``catalog.database``), branches other than main and fences on the table."""
    staging = [r[1] for r in reader.rows(f"SHOW TABLES IN {namespace}") if r[1].startswith("__ctas_")]
    if not reader.exists(table):
        return staging
    branches = [r[0] for r in reader.rows(f"SELECT name FROM {table}.refs WHERE name != 'main'")]
    fences = [k for k in reader.properties(table) if k.startswith((FENCE_PREFIX, LEGACY_BEGUN_PREFIX, PREPARED_PREFIX))]
    return staging + branches + fences


def probe(table_format: str, reader: TableReader, namespace: str, table: str) -> FormatProbe:
    """How the format scenarios read an Iceberg table's leftovers and versions."""
    return FormatProbe(
        table_format,
        reader,
        leftovers=lambda: leftovers(reader, namespace, table),
        versions=lambda name: int(reader.value(f"SELECT count(*) FROM {name}.snapshots")),
    )


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
