"""The Iceberg strategy on Iceberg's JDBC catalog, its tables in a database of the tests' PostgreSQL
server, through the real operator (driver on Spark 4.1 with the 1.11 runtime and PostgreSQL's JDBC
driver). A JDBC catalog commits by a compare-and-swap of the metadata location in one UPDATE, as
the Hive catalog does; the zombie cell proves that it refuses a superseded try's publish.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_ctas.core import markers
from ctas_devstack.postgres import create_database, drop_database
from tests.support.dags import make_dag, run_dag, xcom_value
from tests.support.faults import summarize
from tests.support.format_scenarios import FormatProbe, zombie_in_publish_window
from tests.support.iceberg import ICEBERG_RUNTIME, SPARK_FOR_ICEBERG, locked_jars
from tests.support.spark_versions import on_release
from tests.support.table_reader import TableReader

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.formats]

CATALOG = "pg"
NAMESPACE = "analytics"


@pytest.fixture(scope="module")
def catalog_conf(tmp_path_factory) -> Iterator[dict[str, str]]:
    database = f"iceberg_{uuid.uuid4().hex[:8]}"
    create_database(database)
    prefix = f"spark.sql.catalog.{CATALOG}"
    yield {
        "spark.jars": locked_jars(ICEBERG_RUNTIME, "org.postgresql:postgresql:"),
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
        f"{prefix}.jdbc.user": "postgres",
        f"{prefix}.warehouse": tmp_path_factory.mktemp("jdbc-warehouse").as_uri(),
    }
    drop_database(database)


@pytest.fixture(scope="module")
def reader(catalog_conf, tmp_path_factory) -> Iterator[TableReader]:
    conf = {**catalog_conf, f"spark.sql.catalog.{CATALOG}.cache-enabled": "false"}  # each read sees the catalog now
    session = TableReader(conf, tmp_path_factory.mktemp("jdbc-reader") / "reader.log")
    session.rows(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    yield session
    session.close()


@pytest.fixture
def on_jdbc(monkeypatch, catalog_conf) -> dict[str, str]:
    env, conf = on_release(SPARK_FOR_ICEBERG, archive=True)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {**conf, **catalog_conf}


def _leftovers(reader: TableReader, table: str) -> list[str]:
    staging = [r[1] for r in reader.rows(f"SHOW TABLES IN {CATALOG}.{NAMESPACE}") if r[1].startswith("__ctas_")]
    if not reader.exists(table):
        return staging
    branches = [r[0] for r in reader.rows(f"SELECT name FROM {table}.refs WHERE name != 'main'")]
    return staging + branches + [k for k in reader.properties(table) if k.startswith("airflow_ctas.fence")]


def _ctas(dag_id: str, conf: dict[str, str], **kwargs: Any) -> tuple[str, dict[str, Any]]:
    run = run_dag(make_dag(dag_id, conf=conf, table_format="iceberg", **kwargs))
    return run.task_state, xcom_value(dag_id, run.run_id, "ctas_transaction") or {}


def test_jdbc_catalog_creates_and_fences_a_zombie(stack, reader, on_jdbc, tmp_path):
    created = f"{CATALOG}.{NAMESPACE}.created"
    state, txn = _ctas("jdbc_create", on_jdbc, target_table=created, sql="SELECT id FROM range(40)",
                       checks=[{"type": "unique", "columns": ["id"]}])  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert txn["details"]["metastore_uris"] == on_jdbc[f"spark.sql.catalog.{CATALOG}.uri"]
    assert reader.value(f"SELECT count(*) FROM {created}") == 40
    assert reader.properties(created)[markers.ROW_COUNT] == "40"
    assert _leftovers(reader, created) == []

    target = f"{CATALOG}.{NAMESPACE}.fenced"
    probe = FormatProbe(
        "iceberg-jdbc",
        reader,
        leftovers=lambda: _leftovers(reader, target),
        versions=lambda table: int(reader.value(f"SELECT count(*) FROM {table}.snapshots")),
    )
    result = zombie_in_publish_window(probe, target, on_jdbc, tmp_path, "jdbc_zombie")
    assert result["try2"] == "success" and result["try1_decided_commit"]
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert result["left"] == []
    assert result["problem"] is None, summarize(result["seen"])
