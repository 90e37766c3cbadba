"""Dynamic task mapping: each mapped instance is its own transaction; one failing publishes nothing
and leaves nothing, the others publish and announce their tables."""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlsplit

import pytest

from airflow_provider_ctas.operators import XCOM_KEY
from tests.support.catalog import count, leftovers, table_exists
from tests.support.dags import DAGS_FOLDER, asset_events

pytestmark = pytest.mark.integration

DAG_SOURCE = """\
import pendulum
from airflow.sdk import DAG

from airflow_provider_ctas.operators import AtomicCtasOperator

with DAG("mapped_ctas", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False) as dag:
    AtomicCtasOperator.partial(task_id="ctas", mode="create", conf={conf!r}).expand_kwargs(
        [
            {{"target_table": "{db}.first", "sql": "SELECT id FROM range(3)"}},
            {{"target_table": "{db}.broken", "sql": "SELECT id, raise_error('boom') AS x FROM range(3)"}},
            {{"target_table": "{db}.second", "sql": "SELECT id FROM range(5)"}},
        ]
    )
"""


def test_each_mapped_instance_is_its_own_transaction(stack, spark, database):
    path = DAGS_FOLDER / "mapped_ctas.py"
    path.write_text(DAG_SOURCE.format(db=database, conf={"spark.hadoop.hive.metastore.uris": stack.uri}))
    spec = importlib.util.spec_from_file_location("test_dag_mapped_ctas", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    run = module.dag.test()
    states = {ti.map_index: str(ti.state) for ti in run.get_task_instances()}
    assert states == {0: "success", 1: "failed", 2: "success"}

    assert count(spark, f"{database}.first") == 3 and count(spark, f"{database}.second") == 5
    assert not table_exists(spark, f"{database}.broken")
    assert leftovers(spark, database) == []

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows: list[Any] = list(
            session.scalars(XComModel.get_many(run_id=run.run_id, key=XCOM_KEY, dag_ids="mapped_ctas"))
        )
        txns = {row.map_index: XComModel.deserialize_value(row) for row in rows}
    assert sorted(txns) == [0, 1, 2] and len({t["txn_id"] for t in txns.values()}) == 3
    assert [txns[i]["state"] for i in (0, 1, 2)] == ["committed", "aborted", "committed"]

    # Announced through the alias (a mapped task's table is not known when the DAG is parsed).
    namespace = f"hive://{urlsplit(stack.uri).netloc}"
    for table, rows_ in (("first", 3), ("second", 5)):
        (event,) = asset_events(f"{namespace}/{database}/{table}")
        assert event["extra"]["row_count"] == rows_
    assert asset_events(f"{namespace}/{database}/broken") == []
