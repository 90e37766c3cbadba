"""The Iceberg strategy on AWS Glue's Data Catalog: Iceberg's ``GlueCatalog`` (its table data through
``S3FileIO``) against moto's Glue and S3, one server process on 127.0.0.1 (``ctas_devstack/glue.py``),
through the real operator, its driver on Spark 4.1 with the 1.11 runtime and the AWS SDK's glue
module. Credentials reach the SDK from the environment only, never the operator's conf.

Glue commits by re-reading the table's ``metadata_location``, then ``UpdateTable`` with the version
it read; moto does not check that version, so the dev stack adds the check AWS documents, and the
tests prove both halves: the server refuses a stale version, and every update Iceberg sent carried
one. Glue cannot rename: Iceberg copies the entry, then drops the old one, which is why a create
stopped in between must not purge the files its target now uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.iceberg.strategy import lineage_namespace
from airflow_provider_ctas.core import markers
from ctas_devstack import glue
from ctas_devstack.fault_proxy import FaultProxy
from ctas_devstack.s3 import ACCESS_KEY, SECRET_KEY, S3Server
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import Trial
from tests.support.fixtures import S3_BUCKET
from tests.support.format_scenarios import assert_zombie_fenced, zombie_in_publish_window
from tests.support.gc import entries, gc_cli
from tests.support.iceberg import (
    ICEBERG_RUNTIME,
    assert_reshaped,
    iceberg_ctas,
    leftovers,
    probe,
    spark_jars,
    task_conf_on_spark41,
)
from tests.support.processes import wait_for_line
from tests.support.table_reader import TableReader

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.formats]

CATALOG = "gluecat"
NAMESPACE = "analytics"
ARN = f"arn:aws:glue:{glue.REGION}:{glue.ACCOUNT}"


def _glue_client(s3: S3Server) -> Any:
    import boto3

    return boto3.client(
        "glue", endpoint_url=s3.endpoint, region_name=glue.REGION,
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
    )  # fmt: skip


@pytest.fixture(scope="module")
def catalog_conf(metastore, s3: S3Server) -> Iterator[dict[str, str]]:
    """The catalog's conf, and the SDK's credentials in the environment every JVM started from now
    on inherits (the reader's, the tasks' drivers)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in glue.credentials_env().items():
            patch.setenv(key, value)
        _glue_client(s3).create_database(DatabaseInput={"Name": NAMESPACE})
        yield {
            "spark.jars": spark_jars(ICEBERG_RUNTIME),
            **glue.catalog_conf(CATALOG, s3.endpoint, f"s3://{S3_BUCKET}/glue"),
        }


@pytest.fixture(scope="module")
def reader(catalog_conf, tmp_path_factory) -> Iterator[TableReader]:
    conf = {**catalog_conf, f"spark.sql.catalog.{CATALOG}.cache-enabled": "false"}
    session = TableReader(conf, tmp_path_factory.mktemp("glue-reader") / "reader.log")
    yield session
    session.close()


@pytest.fixture
def on_glue(monkeypatch, catalog_conf) -> dict[str, str]:
    return task_conf_on_spark41(monkeypatch, catalog_conf)


def _updates(s3: S3Server, since: int) -> list[dict[str, Any]]:
    return [r for r in s3.requests()[since:] if r.get("glue") == "UpdateTable"]


def test_the_glue_server_refuses_an_update_at_a_stale_version(s3):
    client = _glue_client(s3)
    client.create_database(DatabaseInput={"Name": "versions"})
    client.create_table(DatabaseName="versions", TableInput={"Name": "versioned", "Parameters": {"v": "1"}})
    version = client.get_table(DatabaseName="versions", Name="versioned")["Table"]["VersionId"]
    client.update_table(DatabaseName="versions", TableInput={"Name": "versioned", "Parameters": {"v": "2"}},
                        VersionId=version)  # fmt: skip
    with pytest.raises(client.exceptions.ConcurrentModificationException):
        client.update_table(DatabaseName="versions", TableInput={"Name": "versioned", "Parameters": {"v": "3"}},
                            VersionId=version)  # fmt: skip
    assert client.get_table(DatabaseName="versions", Name="versioned")["Table"]["Parameters"] == {"v": "2"}


def test_glue_catalog_creates_reshapes_replaces_and_fences_a_zombie(stack, s3, reader, on_glue, tmp_path):
    assert not any("SECRET" in key.upper() or SECRET_KEY in value for key, value in on_glue.items())
    created = f"{CATALOG}.{NAMESPACE}.created"
    state, txn = iceberg_ctas("glue_create", on_glue, target_table=created, sql="SELECT id FROM range(40)",
                              checks=[{"type": "unique", "columns": ["id"]}])  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert txn["details"]["metastore_uris"] == ARN
    assert lineage_namespace(on_glue, txn["details"]) == ARN
    assert lineage_namespace(on_glue, None) is None, "the conf names no account: only the driver can"
    assert reader.value(f"SELECT count(*) FROM {created}") == 40
    assert reader.properties(created)[markers.ROW_COUNT] == "40"
    assert leftovers(reader, f"{CATALOG}.{NAMESPACE}", created) == []
    assert SECRET_KEY not in str(txn)
    assert_reshaped(reader, "glue_reshape", on_glue, f"{CATALOG}.{NAMESPACE}", created)

    target = f"{CATALOG}.{NAMESPACE}.fenced"
    since = len(s3.requests())
    scenario = probe("iceberg-glue", reader, f"{CATALOG}.{NAMESPACE}", target)
    result = zombie_in_publish_window(scenario, target, on_glue, tmp_path, "glue_zombie")
    assert_zombie_fenced(reader, target, result)
    updates = _updates(s3, since)
    assert updates and all(update["version_id"] for update in updates), updates


def test_a_create_stopped_between_glues_copy_and_drop_keeps_the_published_files(stack, s3, reader, on_glue):
    """Iceberg's rename on Glue is a copy of the entry, then a drop of the old one. Stopped in
    between, both entries point at the same files: GC removes the staging entry, never the files."""
    target = f"{CATALOG}.{NAMESPACE}.halfway"
    state, txn = iceberg_ctas("glue_halfway", on_glue, target_table=target, sql="SELECT id FROM range(25)")
    assert state == "success", txn
    staging = markers.staging_name(txn["txn_id"], 1)
    client = _glue_client(s3)
    published = client.get_table(DatabaseName=NAMESPACE, Name="halfway")["Table"]
    client.create_table(DatabaseName=NAMESPACE, TableInput={  # what renameTable's first call made
        "Name": staging, "TableType": published["TableType"], "Parameters": published["Parameters"],
        "StorageDescriptor": published["StorageDescriptor"],
    })  # fmt: skip
    location = published["StorageDescriptor"]["Location"].split(f"{S3_BUCKET}/", 1)[1]
    files = _objects(s3, location)
    assert any(key.endswith(".parquet") for key in files)

    conf = [arg for key, value in on_glue.items() for arg in ("--conf", f"{key}={value}")]
    report = gc_cli("--catalog", CATALOG, "--database", NAMESPACE, "--min-age", "0s", *conf)
    assert f"{CATALOG}.{NAMESPACE}.{staging}" in entries(report, "removed"), report
    assert not reader.exists(f"{CATALOG}.{NAMESPACE}.{staging}")
    assert reader.value(f"SELECT count(*) FROM {target}") == 25
    assert _objects(s3, location) == files, "GC deleted files the published table uses"


def _objects(s3: S3Server, prefix: str) -> list[str]:
    listing = s3.client().list_objects_v2(Bucket=S3_BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def test_an_update_glue_applied_but_whose_answer_was_a_503_is_decided_from_the_table(stack, s3, reader, on_glue,
                                                                                      tmp_path):  # fmt: skip
    """Glue applies try 1's publish (one ``UpdateTable``), but a proxy answers 503 in its place, as a
    gateway does. The AWS SDK sends the update again, with the version it read, which Glue now
    refuses as a concurrent update: the driver must read the table and find its own publish there,
    not fail a try whose version is published."""
    target = f"{CATALOG}.{NAMESPACE}.lost"
    reader.rows(f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(5)")
    proxy = FaultProxy(("127.0.0.1", s3.port)).start()
    dag_id = "glue_lost"
    make_dag(dag_id, retries=0, target_table=target, mode="replace", table_format="iceberg",
             sql="SELECT id, CAST({{ ti.try_number }} AS BIGINT) AS written_by_try FROM range(100)",
             conf={**on_glue, f"spark.sql.catalog.{CATALOG}.glue.endpoint": proxy.url})  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(release), "only_try": 1}}
    try:
        first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "lost", tmp_path / "try1.log", faults).start()
        wait_for_line(progress, "before_publish try=1", timeout=240)
        since = len(s3.requests())
        proxy.lose_answer(r"(?i)x-amz-target: ?AWSGlue\.UpdateTable", "503")
        release.touch()
        state = first.wait()
    finally:
        proxy.stop()
    txn = xcom_value(dag_id, "lost", "ctas_transaction")
    assert len(proxy.lost) == 1, proxy.lost
    assert len(_updates(s3, since)) >= 2, "the SDK sent the update again"
    assert state == "success", (tmp_path / "try1.log").read_text(errors="replace")[-3000:]
    assert (txn["try_number"], txn["outcome"]) == (1, "published"), txn
    assert reader.rows(f"SELECT count(*), max(written_by_try) FROM {target}") == [[100, 1]]
    assert leftovers(reader, f"{CATALOG}.{NAMESPACE}", target) == []
