"""Deliver a task's failure callback as the DAG processor does: ``python -m tests.support.callback FILE DAG RUN``.

When a worker is lost, the scheduler sends a ``TaskCallbackRequest`` built from the task instance
row *as it is when the request is made* (so, late, it names the current try), and a DAG-processor
process parses the DAG file and runs the callbacks. This builds the request as the scheduler's
heartbeat-timeout path does, then parses and runs it as the DAG processor does (``BundleDagBag`` +
``_execute_callbacks``).
"""

from __future__ import annotations

import sys
from pathlib import Path


def deliver_failure_callback(dag_file: str, dag_id: str, run_id: str, task_id: str = "ctas") -> int:
    import structlog
    from airflow.api_fastapi.execution_api.datamodels.taskinstance import DagRun as DRDataModel
    from airflow.api_fastapi.execution_api.datamodels.taskinstance import TIRunContext
    from airflow.callbacks.callback_requests import TaskCallbackRequest
    from airflow.dag_processing.dagbag import BundleDagBag
    from airflow.dag_processing.processor import _execute_callbacks
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        dag_run = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one()
        ti = dag_run.get_task_instance(task_id, session=session)
        assert ti is not None
        request = TaskCallbackRequest(
            filepath=dag_file,
            bundle_name="dags-folder",
            bundle_version=None,
            ti=ti,
            msg="delivered by tests.support.callback (a lost worker's failure callback)",
            task_callback_type=TaskInstanceState.UP_FOR_RETRY if ti.is_eligible_to_retry() else None,
            context_from_server=TIRunContext(
                dag_run=DRDataModel.model_validate(ti.dag_run, from_attributes=True),
                max_tries=ti.max_tries,
                variables=[],
                connections=[],
                xcom_keys_to_clear=[],
            ),
        )
        try_number = ti.try_number
    dagbag = BundleDagBag(
        dag_folder=dag_file, bundle_path=Path(dag_file).parent, bundle_name="dags-folder", load_op_links=False
    )
    _execute_callbacks(dagbag, [request], structlog.get_logger("callback"))
    return int(try_number)


if __name__ == "__main__":
    print(f"CALLBACK_DELIVERED try={deliver_failure_callback(*sys.argv[1:4])}", flush=True)
