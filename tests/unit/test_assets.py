"""Which outlet the operator declares, the ``hive://`` URI scheme, and the event a publish records."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_provider_ctas.core.details import received
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.transaction import Outcome, TransactionKey, TwoPhaseTable
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.operators.assets import (
    NonCanonicalAssetUriWarning,
    convert_asset_to_openlineage,
    create_asset,
    partition_keys,
    record_publish_event,
    sanitize_uri,
    table_asset,
)

if TYPE_CHECKING:
    from urllib.parse import SplitResult


def make(**kwargs: Any) -> AtomicCtasOperator:
    options: dict[str, Any] = {"task_id": "t", "sql": "SELECT 1", "target_table": "db.t"}
    options.update(kwargs)
    return AtomicCtasOperator(**options)


@pytest.mark.parametrize("mode", ["create", "replace", "overwrite_partitions"])
def test_modes_that_only_succeed_by_publishing_declare_the_table_itself(mode, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    op = make(mode=mode, partition_by=["ds"], target_table="Analytics.Daily")
    assert op.outlets == [Asset(uri="hive://embedded/analytics/daily")]


def test_the_uri_names_the_metastore_the_conf_names():
    op = make(conf={"spark.hadoop.hive.metastore.uris": "thrift://meta.example:9083"})
    assert op.outlets == [Asset(uri="hive://meta.example:9083/db/t")]


@pytest.mark.parametrize(
    "line",
    [
        "spark.hadoop.hive.metastore.uris thrift://meta.example:9083",
        "spark.hadoop.hive.metastore.uris=thrift://meta.example:9083",
        "spark.hadoop.hive.metastore.uris: thrift://meta.example:9083",
        "spark.hadoop.hive.metastore.uris\tthrift://meta.example:9083",
        "  spark.hadoop.hive.metastore.uris   =   thrift://meta.example:9083  ",
        "spark.hadoop.hive.metastore.uris \\\n    thrift://meta.example:9083",
    ],
    ids=["space", "equals", "colon", "tab", "padded", "continued"],
)
def test_spark_defaults_conf_is_read_by_the_java_properties_rules(line, tmp_path, monkeypatch):
    """Spark reads spark-defaults.conf with java.util.Properties: every separator form names the same
    metastore (a parser that split on a space fell back to hive://embedded)."""
    (tmp_path / "spark-defaults.conf").write_text(f"# a comment\n! another\nspark.master local[2]\n{line}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert make().outlets == [Asset(uri="hive://meta.example:9083/db/t")]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "create_if_not_exists"},  # succeeds without publishing when the table exists
        {"target_table": "db.t_{{ ds_nodash }}"},
        {"mode": "{{ params.mode }}"},
        {"conf": {"spark.hadoop.hive.metastore.uris": "{{ var.value.metastore }}"}},
    ],
)
def test_an_alias_when_success_may_not_mean_published_or_the_table_is_known_only_at_run_time(kwargs):
    op = make(**kwargs)
    assert op.outlets == [AssetAlias(name="airflow-ctas:adhoc_airflow.t")]


def test_user_outlets_are_kept_and_events_can_be_turned_off():
    mine = Asset(uri="s3://bucket/report")
    assert make(outlets=[mine]).outlets[0] == mine and len(make(outlets=[mine]).outlets) == 2
    assert make(asset_events=False).outlets == []


def test_the_scheme_normalizes_and_converts_to_the_lineage_dataset():
    with pytest.warns(NonCanonicalAssetUriWarning, match="write 'hive://meta:9083/db/t'"):
        assert sanitize_uri(urlsplit("hive://Meta/DB/T")).geturl() == "hive://meta:9083/db/t"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the canonical forms pass without a warning
        assert sanitize_uri(urlsplit("hive://embedded/db/t")).geturl() == "hive://embedded/db/t"
        assert sanitize_uri(urlsplit("hive://meta:9083/db/t")).geturl() == "hive://meta:9083/db/t"
    with pytest.raises(ValueError, match="database and a table"):
        sanitize_uri(urlsplit("hive://meta:9083/db"))
    with pytest.raises(ValueError, match="must name the metastore"):
        sanitize_uri(urlsplit("hive:///db/t"))
    asset = create_asset(database="db", table="t", host="meta", port=9083)
    dataset = convert_asset_to_openlineage(asset, None)
    assert (asset.uri, dataset.namespace, dataset.name) == ("hive://meta:9083/db/t", "hive://meta:9083", "db.t")


def _apache_hive_sanitize_uri(uri: SplitResult) -> SplitResult:
    """apache-airflow-providers-apache-hive 9.7.1's handler (airflow/providers/apache/hive/assets/hive.py),
    which Airflow uses instead of this provider's when both are installed."""
    if not uri.netloc:
        raise ValueError("URI format hive:// must contain a host")
    if len(uri.path.split("/")) != 3:
        raise ValueError("URI format hive:// must contain database, schema, and table names")
    return uri


MADE: dict[str, Callable[[], Asset]] = {
    "create_asset": lambda: create_asset(database="Analytics", table="Daily", host="Metastore"),
    "create_asset-port": lambda: create_asset(database="analytics", table="daily", host="metastore", port=9090),
    "create_asset-embedded": lambda: create_asset(database="analytics", table="daily"),
    "outlet": lambda: make(target_table="Analytics.Daily").outlets[0],
    "outlet-metastore": lambda: make(conf={"spark.hadoop.hive.metastore.uris": "thrift://MetaStore.Example"}).outlets[
        0
    ],
    "event": lambda: table_asset("hive://metastore.example:9083", TableRef.parse("Analytics.Daily")),
}


@pytest.mark.parametrize("made", MADE)
def test_the_assets_this_provider_makes_are_the_same_under_either_hive_handler(made):
    """Whichever provider's ``hive`` handler Airflow keeps, the URI of a table's asset (the operator's
    outlet, its events, ``create_asset`` for a downstream schedule) comes out unchanged."""
    asset = MADE[made]()
    parsed = urlsplit(asset.uri)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sanitize_uri(parsed).geturl() == asset.uri
    assert _apache_hive_sanitize_uri(parsed).geturl() == asset.uri


def test_partition_keys_are_values_for_one_column_and_joined_values_for_several():
    """Composite keys in Airflow's convention: its own mappers (the scheduler's code) consume them."""
    from airflow.partition_mappers.identity import IdentityMapper
    from airflow.partition_mappers.product import ProductMapper
    from airflow.partition_mappers.temporal import StartOfDayMapper, StartOfMonthMapper

    assert partition_keys(["ds=2024-01-01", "ds=2024-01-02"]) == ["2024-01-01", "2024-01-02"]
    [key] = partition_keys(["ds=2024-01-15/country=US"])
    assert key == "2024-01-15|US"
    day = "%Y-%m-%d"  # a `ds` column's values; Airflow's temporal mappers default to ISO date-times
    assert ProductMapper(StartOfMonthMapper(input_format=day), IdentityMapper()).to_downstream(key) == "2024-01|US"
    assert StartOfDayMapper(input_format=day).to_downstream(partition_keys(["ds=2024-01-15"])[0]) == "2024-01-15"


def committed(outcome: Outcome, **details: Any) -> TwoPhaseTable:
    from airflow_provider_ctas.catalogs import create_two_phase_table

    key = TransactionKey(dag_id="d", task_id="t", run_id="r", map_index=-1)
    table = create_two_phase_table(
        key=key, conn_id="spark_default", target="db.t", mode="overwrite_partitions", table_format="parquet",
        partition_by=["ds"], table_properties=None, allow_swap=False, superseded_retention=0,
    )  # fmt: skip
    table.begin(1, "2024-01-01T00:00:00+00:00")
    table.mark_prepared(1, "2024-01-01T00:00:01+00:00")
    table.commit(1, "2024-01-01T00:00:02+00:00", outcome, received(details))
    return table


def test_a_publish_records_one_event_per_partition_with_its_extra():
    asset = Asset(uri="hive://embedded/db/t")
    events = OutletEventAccessors()
    table = committed(
        Outcome.PUBLISHED, row_count=7, publish={"mechanism": "partitions", "partitions": ["ds=2024-01-02"]}
    )
    assert record_publish_event({"outlet_events": events}, asset, "hive://embedded", table)
    accessor = events[asset]
    assert accessor.partition_keys == {"2024-01-02"}
    assert accessor.extra == {
        "row_count": 7,
        "txn_id": table.txn_id,
        "try_number": 1,
        "outcome": "published",
        "publish_mechanism": "partitions",
        "partitions": ["ds=2024-01-02"],
    }


def test_an_alias_gets_an_event_only_for_a_publish():
    alias = AssetAlias(name="airflow-ctas:d.t")
    events = OutletEventAccessors()
    context: Any = {"outlet_events": events}
    assert not record_publish_event(context, alias, "hive://embedded", committed(Outcome.TARGET_EXISTS))
    assert events[alias].asset_alias_events == []
    assert record_publish_event(context, alias, "hive://meta:9083", committed(Outcome.ALREADY_PUBLISHED))
    (event,) = events[alias].asset_alias_events
    assert event.dest_asset_key.uri == "hive://meta:9083/db/t"
    assert event.extra["outcome"] == "already_published"
