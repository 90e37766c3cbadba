"""The per-try fences on a replaced Iceberg table (``catalogs/iceberg/fence.py``), and the REST
catalog's lineage namespace. The commits that carry them run against real catalogs in
``tests/integration/test_iceberg*.py``."""

from __future__ import annotations

import json

import pytest

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg.strategy import lineage_namespace

TXN, OTHER = "a" * 32, "b" * 32


def _begun(try_number: int) -> tuple[str, str]:
    return fence.fence_key(TXN, try_number), fence.begun_record(f"2026-11-27T0{try_number}:00:00+00:00", {"t": 1})


def test_a_late_begin_of_an_older_try_does_not_hide_the_newer_one():
    """Whatever order the two begins land in (a REST catalog applies property updates key by key),
    the newest try that began is the one with the highest key."""
    newer_first = dict([_begun(3)])
    newer_first.update([_begun(2)])  # try 2's begin landed after try 3's
    assert fence.newest(newer_first, TXN) == 3
    assert sorted(fence.tries(newer_first, TXN)) == [2, 3]
    assert fence.keys_of(newer_first, TXN, up_to=2) == [fence.fence_key(TXN, 2)], "try 3's abort-free cleanup"


def test_fences_of_other_transactions_and_other_properties_are_not_ours():
    props = {**dict([_begun(1)]), fence.fence_key(OTHER, 5): "{}", "owner": "kept", fence.FENCE_PREFIX + "x.y": "z"}
    assert fence.newest(props, TXN) == 1
    assert fence.newest(props, OTHER) == 5
    assert fence.keys_of(props, TXN) == [fence.fence_key(TXN, 1)]
    assert set(fence.all_fences(props)) == {TXN, OTHER}, "a key whose try is not a number is ignored"


def test_when_a_try_began_is_read_back_and_unreadable_records_are_empty():
    key, record = _begun(2)
    assert fence.began({key: record}, TXN, 2) == {"begun_at": "2026-11-27T02:00:00+00:00", "task": {"t": 1}}
    assert fence.began({key: "not json"}, TXN, 2) == {}
    assert fence.began({key: record}, TXN, 3) == {}


def test_an_earlier_releases_single_fence_is_read_and_removed_with_its_begin_record():
    legacy = {
        fence.FENCE_PREFIX + TXN: "4",
        fence.LEGACY_BEGUN_PREFIX + TXN: json.dumps({"begun_at": "2026-11-01T00:00:00+00:00", "task": {}}),
    }
    assert fence.newest(legacy, TXN) == 4
    assert fence.began(legacy, TXN, 4)["begun_at"] == "2026-11-01T00:00:00+00:00"
    assert fence.keys_of(legacy, TXN) == [fence.FENCE_PREFIX + TXN, fence.LEGACY_BEGUN_PREFIX + TXN]
    assert fence.keys_of(legacy, TXN, up_to=3) == [], "a newer try's fence stays"


def test_a_rest_catalog_is_named_by_its_url_and_a_metastore_as_hive():
    rest = {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog", "spark.sql.catalog.lake.type": "rest"}
    assert lineage_namespace({**rest, "spark.sql.catalog.lake.uri": "http://Catalog:8181/api/"}) == (
        "http://catalog:8181/api"
    )
    assert lineage_namespace(None, {"metastore_uris": "https://polaris.example.com/api/catalog"}) == (
        "https://polaris.example.com:443/api/catalog"
    )
    assert lineage_namespace(None, {"metastore_uris": "thrift://ms:9083"}) == "hive://ms:9083"


def test_a_glue_catalog_is_named_by_its_arn_which_the_conf_gives_only_with_region_and_account():
    from airflow_provider_ctas.operators.lineage import lineage

    glue = {"spark.sql.catalog.g": "org.apache.iceberg.spark.SparkCatalog", "spark.sql.catalog.g.type": "glue"}
    assert lineage_namespace(glue) is None, "the account is the caller's: only the driver can ask Glue"
    assert lineage_namespace({**glue, "spark.sql.catalog.g.client.region": "eu-west-1"}) is None
    named = {**glue, "spark.sql.catalog.g.client.region": "eu-west-1", "spark.sql.catalog.g.glue.id": "111122223333"}
    assert lineage_namespace(named) == "arn:aws:glue:eu-west-1:111122223333"
    reported = {"metastore_uris": "arn:aws:glue:us-east-1:123456789012"}
    assert lineage_namespace(glue, reported) == "arn:aws:glue:us-east-1:123456789012"
    events = lineage(namespace=reported["metastore_uris"], sql="SELECT 1", target="g.sales.orders",
                     details={"inputs": ["sales.items"]}, complete=True)  # fmt: skip
    assert events.outputs[0].name == "table/sales/orders", "OpenLineage's naming for a Glue table"
    assert [d.name for d in events.inputs] == ["table/sales/items"]


def test_a_jdbc_catalog_is_named_by_its_database_and_never_shows_its_credentials():
    from airflow_provider_ctas.catalogs.iceberg.metadata import _without_secrets

    url = "jdbc:postgresql://user:secret@db.example.com:6543/catalog?password=secret&ssl=true"
    assert lineage_namespace(None, {"metastore_uris": url}) == "jdbc:postgresql://db.example.com:6543/catalog"
    assert "secret" not in _without_secrets(url)
    assert lineage_namespace(None, {"metastore_uris": "jdbc:sqlite:/var/cat.db?x=1"}) == "jdbc:sqlite:/var/cat.db"


def test_a_named_catalogs_tables_are_named_after_its_service_or_its_metastore():
    from airflow_provider_ctas.catalogs.metastore.namespace import catalog_namespace

    conf = {
        "spark.sql.catalog.lake.uri": "http://rest:8181",
        "spark.sql.catalog.ice.uri": "thrift://ms:9083",
        "spark.hadoop.hive.metastore.uris": "thrift://session:9083",
    }
    assert catalog_namespace(conf, "lake") == "http://rest:8181"
    assert catalog_namespace(conf, "ice") == "hive://ms:9083"
    assert catalog_namespace(conf, "other") == "hive://session:9083", "no uri: the session's metastore"


def test_paths_are_named_as_openlineage_names_files():
    from airflow_provider_ctas.catalogs.metastore.namespace import path_dataset

    assert path_dataset("file:/data/events") == ("file", "/data/events")
    assert path_dataset("s3a://bucket/warehouse/t") == ("s3://bucket", "warehouse/t")
    assert path_dataset("hdfs://nn:8020/w/t") == ("hdfs://nn:8020", "/w/t")


@pytest.mark.parametrize(
    ("url", "table", "expected"),
    [
        (
            "jdbc:postgresql://pg:5433/shop?user=u&password=secret",
            "sales.orders",
            ("postgres://pg:5433", "shop.sales.orders"),
        ),
        ("jdbc:postgresql://pg/shop", "orders", ("postgres://pg:5432", "shop.public.orders")),
        ("jdbc:mysql://user:secret@db/shop", "orders", ("mysql://db:3306", "shop.orders")),
        ("jdbc:sqlserver://ms:1433", "dbo.orders", ("sqlserver://ms:1433", "dbo.orders")),
        ("jdbc:derby:memory:shop;create=true", "APP.ORDERS", ("derby:memory:shop", "APP.ORDERS")),
        ("jdbc:oracle:thin:scott/secret@ora:1521:orcl", "S.T", ("oracle://ora:1521:orcl", "S.T")),
    ],
)
def test_jdbc_sources_are_named_as_openlineage_names_them_and_never_with_credentials(url, table, expected):
    from airflow_provider_ctas.catalogs.metastore.namespace import jdbc_dataset

    named = jdbc_dataset(url, table)
    assert named == expected
    assert "secret" not in str(named) and "user" not in named[0]
