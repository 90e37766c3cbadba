"""Generate real DAG files, run them with ``dag.test()``, and read back what Airflow recorded.

``dag.test()`` needs the DAG in a bundle (the DAGs folder) to serialize it, so each test writes a
small DAG file there and runs the object imported from that file.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DAGS_FOLDER = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])

TEMPLATE = """\
import datetime
import json

import pendulum
from airflow.sdk import DAG

from airflow_provider_ctas.operators import AtomicCtasOperator

KWARGS = json.loads({kwargs!r})
{extra}
with DAG(
    {dag_id!r},
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    default_args={{"retries": {retries}, "retry_delay": datetime.timedelta(seconds=0)}},
) as dag:
    AtomicCtasOperator(task_id="ctas", **KWARGS{operator_extra})
"""


def make_dag(dag_id: str, *, retries: int = 0, extra: str = "", operator_extra: str = "", **kwargs: Any) -> Any:
    path = DAGS_FOLDER / f"{dag_id}.py"
    path.write_text(
        TEMPLATE.format(
            kwargs=json.dumps(kwargs),
            dag_id=dag_id,
            retries=retries,
            extra=extra,
            operator_extra=operator_extra,
        )
    )
    return load_dag(path)


def load_dag(path: Path) -> Any:
    """The ``dag`` of a DAG file in the DAGs folder, imported afresh."""
    spec = importlib.util.spec_from_file_location(f"test_dag_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@dataclass
class RunResult:
    state: str
    run_id: str
    task_state: str
    try_number: int


def run_dag(dag: Any, task_id: str = "ctas") -> RunResult:
    dag_run = dag.test()
    tis = dag_run.get_task_instances()
    ti = next(t for t in tis if t.task_id == task_id)
    return RunResult(str(dag_run.state), dag_run.run_id, str(ti.state), ti.try_number)


def xcom_value(dag_id: str, run_id: str, key: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run_id, key=key, dag_ids=dag_id)).first()
        return None if row is None else XComModel.deserialize_value(row)


def state_store_value(dag_id: str, run_id: str, key: str) -> Any:
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(TaskStateStoreModel).where(
                TaskStateStoreModel.dag_id == dag_id,
                TaskStateStoreModel.run_id == run_id,
                TaskStateStoreModel.key == key,
            )
        ).first()
        return None if row is None else json.loads(row.value)


def asset_events(uri: str) -> list[dict[str, Any]]:
    """The asset events Airflow recorded for ``uri``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetEvent.partition_key, AssetEvent.extra, AssetEvent.source_dag_id)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        ).all()
    return [{"partition_key": key, "extra": extra, "dag_id": dag_id} for key, extra, dag_id in rows]
