"""Asset events on real Airflow (``dag.test()``, events read back from Airflow's database): one per
published partition, none for a failed try or a ``create_if_not_exists`` that found its table."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.dags import asset_events as events
from tests.support.dags import make_dag, run_dag

pytestmark = pytest.mark.integration


def test_events_exactly_for_what_was_published(stack, spark, database):
    conf = {"spark.hadoop.hive.metastore.uris": stack.uri}
    namespace = f"hive://{urlsplit(stack.uri).netloc}"
    target = f"{database}.events"
    uri = f"{namespace}/{database}/events"
    two_days = "SELECT id, concat('2024-01-0', CAST(1 + id % 2 AS STRING)) AS ds FROM range(10)"

    partitions: dict[str, Any] = {
        "target_table": target,
        "mode": "overwrite_partitions",
        "partition_by": ["ds"],
        "conf": conf,
    }
    published = make_dag("assets_parts", sql=two_days, **partitions)
    assert [outlet.uri for outlet in published.get_task("ctas").outlets] == [uri]
    assert run_dag(published).task_state == "success"
    got = events(uri)
    assert sorted(e["partition_key"] for e in got) == ["2024-01-01", "2024-01-02"]
    assert all(e["extra"]["outcome"] == "published" and e["extra"]["row_count"] == 10 for e in got)
    assert got[0]["extra"]["partitions"] == ["ds=2024-01-01", "ds=2024-01-02"]

    failing = "SELECT id, CASE WHEN id = 3 THEN raise_error('boom') ELSE '2024-01-03' END AS ds FROM range(10)"
    failed = make_dag("assets_parts_fail", sql=failing, **partitions)
    assert run_dag(failed).task_state == "failed"
    assert len(events(uri)) == 2, "a failed try announces nothing"

    found = make_dag("assets_if_not_exists", target_table=target, mode="create_if_not_exists", sql=two_days, conf=conf)
    assert run_dag(found).task_state == "success"
    assert len(events(uri)) == 2, "create_if_not_exists that found the table announces nothing"

    templated = make_dag("assets_templated", target_table=f"{database}.daily_{{{{ ti.task_id }}}}", sql="SELECT 1 AS x")
    assert run_dag(templated).task_state == "success"
    # No conf here: the namespace is the one the driver reported, as in the lineage.
    (event,) = events(f"{namespace}/{database}/daily_ctas")
    assert event["extra"]["outcome"] == "published" and event["extra"]["row_count"] == 1
