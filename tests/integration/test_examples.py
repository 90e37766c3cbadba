"""Every example DAG is parsed and run with dag.test() against real Spark and a real metastore."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from tests.support.catalog import comments, count, properties
from tests.support.dags import DAGS_FOLDER, asset_events

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "example_dags"


def load_example(name: str):
    shutil.copytree(EXAMPLES, DAGS_FOLDER / "examples", dirs_exist_ok=True)
    path = DAGS_FOLDER / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def states(dag_run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def test_every_example_parses():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(EXAMPLES))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {
        "example_atomic_ctas",
        "example_replace_dimension",
        "example_partitioned_backfill",
        "example_orders_report",
        "example_maintenance_gc",
        "example_publish_group",
    }


def test_daily_snapshot_example(stack, spark):
    import pendulum

    dag = load_example("example_atomic_ctas")
    run = dag.test(logical_date=pendulum.datetime(2024, 3, 1, tz="UTC"))
    assert states(run) == {"create_database": "success", "daily_orders": "success", "report": "success"}
    assert count(spark, "analytics.daily_orders_20240301") == 10000
    assert properties(spark, "analytics.daily_orders_20240301")["team"] == "data-eng"


def test_replace_dimension_example_twice(stack, spark):
    import pendulum

    dag = load_example("example_replace_dimension")
    for day in (1, 2):
        run = dag.test(logical_date=pendulum.datetime(2024, 3, day, tz="UTC"))
        assert states(run) == {"create_database": "success", "dim_customer": "success"}
        published = properties(spark, "analytics.dim_customer")
        assert published["refreshed_for"] == f"2024-03-0{day}"
        # Audited before the publish: every check passed, and the table says so.
        assert published["airflow_ctas.checks"].startswith("6/6 passed: row_count=97;")
        if day == 1:  # documented by hand between the two runs: the second replace keeps it
            spark.sql("ALTER TABLE analytics.dim_customer ALTER COLUMN name COMMENT 'display name'")
    assert count(spark, "analytics.dim_customer") == 97
    assert comments(spark, "analytics.dim_customer") == (
        "One row per customer, rebuilt daily",
        {"name": "display name", "tier": "bronze, silver or gold"},
    )


def test_partitioned_backfill_example(stack, spark):
    import pendulum

    dag = load_example("example_partitioned_backfill")
    for day in (1, 2, 1):  # the third run re-processes 2024-03-01: its partition is replaced, not doubled
        run = dag.test(logical_date=pendulum.datetime(2024, 3, day, tz="UTC"))
        assert states(run) == {"create_database": "success", "orders_by_day": "success"}
    assert count(spark, "analytics.orders_by_day", "ds = '2024-03-01'") == 1001
    assert count(spark, "analytics.orders_by_day", "ds = '2024-03-02'") == 1002
    assert count(spark, "analytics.orders_by_day") == 2003
    # Each run announced the partition it published (example_orders_report runs on these).
    table_asset = dag.get_task("orders_by_day").outlets[0]
    assert [e["partition_key"] for e in asset_events(table_asset.uri)][-3:] == [
        "2024-03-01",
        "2024-03-02",
        "2024-03-01",
    ]


def test_maintenance_gc_example(stack, spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS analytics")
    dag = load_example("example_maintenance_gc")
    run = dag.test()
    assert states(run) == {"collect_garbage": "success"}
