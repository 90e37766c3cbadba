"""Run exactly one try of a task instance in this process: ``python -m tests.support.trial FILE DAG RUN``.

``dag.test()`` runs every try of a fresh run inside the test process; fault injection needs each
try to be a separate process that a test can kill (SIGKILL, SIGTERM), and the next try to belong
to the same run (the same transaction). This does what ``dag.test()`` does for one try of one
task instance of a given run id, creating the run on first use.
"""

from __future__ import annotations

import importlib.util
import sys


def run_one_try(dag_file: str, dag_id: str, run_id: str, task_id: str = "ctas") -> str:
    import pendulum
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dagrun import DagRun, get_or_create_dagrun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from airflow.utils.types import DagRunTriggeredByType

    spec = importlib.util.spec_from_file_location(f"trial_{dag_id}", dag_file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.dag

    with create_session() as session:
        manager = DagBundlesManager()
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        sync_bag_to_db(  # this DAG's file only: the folder holds every DAG the session's tests wrote
            BundleDagBag(dag_folder=dag_file, bundle_path=bundle.path, bundle_name=bundle.name),
            bundle.name,
            bundle.version,
        )

    with create_session() as session:
        dag_run = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one_or_none()
        if dag_run is None:
            now = pendulum.now("UTC")
            scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
            dag_run = get_or_create_dagrun(
                dag=scheduler_dag,
                run_id=run_id,
                logical_date=now,
                data_interval=(now, now),
                run_after=now,
                conf=None,
                triggered_by=DagRunTriggeredByType.TEST,
                triggering_user_name="trial",
                start_date=now,
                session=session,
            )
        dag_run.state = DagRunState.RUNNING
        ti = dag_run.get_task_instance(task_id, session=session)
        assert ti is not None, f"{dag_id} has no task {task_id}"
        ti.try_number += 1
        ti.state = TaskInstanceState.SCHEDULED
        session.commit()
        session.refresh(ti)
        session.expunge(ti)
    _run_task(ti=ti, task=dag.task_dict[task_id])
    with create_session() as session:
        after = (
            session.query(DagRun)
            .filter_by(dag_id=dag_id, run_id=run_id)
            .one()
            .get_task_instance(task_id, session=session)
        )
        assert after is not None
        return str(after.state)


if __name__ == "__main__":
    state = run_one_try(*sys.argv[1:4])
    print(f"TRIAL_STATE {state}", flush=True)
    sys.exit(0 if state == "success" else 1)
