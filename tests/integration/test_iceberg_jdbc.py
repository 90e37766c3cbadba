"""The Iceberg strategy on Iceberg's JDBC catalog, its tables in a database of the tests' PostgreSQL
server, through the real operator (driver on Spark 4.1 with the 1.11 runtime and PostgreSQL's JDBC
driver). A JDBC catalog commits by a compare-and-swap of the metadata location in one UPDATE, as
the Hive catalog does; the zombie cell proves that it refuses a superseded try's publish.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from airflow_provider_ctas.core import markers
from ctas_devstack.postgres import create_database, drop_database
from tests.support.format_scenarios import assert_zombie_fenced, zombie_in_publish_window
from tests.support.iceberg import (
    ICEBERG_RUNTIME,
    assert_reshaped,
    iceberg_ctas,
    leftovers,
    probe,
    spark_jars,
    task_conf_on_spark41,
)
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
        "spark.jars": spark_jars(ICEBERG_RUNTIME, "org.postgresql:postgresql:"),
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
    return task_conf_on_spark41(monkeypatch, catalog_conf)


def test_jdbc_catalog_creates_reshapes_and_fences_a_zombie(stack, reader, on_jdbc, tmp_path):
    created = f"{CATALOG}.{NAMESPACE}.created"
    state, txn = iceberg_ctas("jdbc_create", on_jdbc, target_table=created, sql="SELECT id FROM range(40)",
                       checks=[{"type": "unique", "columns": ["id"]}])  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert txn["details"]["metastore_uris"] == on_jdbc[f"spark.sql.catalog.{CATALOG}.uri"]
    assert reader.value(f"SELECT count(*) FROM {created}") == 40
    assert reader.properties(created)[markers.ROW_COUNT] == "40"
    assert leftovers(reader, f"{CATALOG}.{NAMESPACE}", created) == []
    assert_reshaped(reader, "jdbc_reshape", on_jdbc, f"{CATALOG}.{NAMESPACE}", created)

    target = f"{CATALOG}.{NAMESPACE}.fenced"
    scenario = probe("iceberg-jdbc", reader, f"{CATALOG}.{NAMESPACE}", target)
    result = zombie_in_publish_window(scenario, target, on_jdbc, tmp_path, "jdbc_zombie")
    assert_zombie_fenced(reader, target, result)
