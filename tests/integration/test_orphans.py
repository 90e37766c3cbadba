"""The live task decides the commit: a Spark driver that outlives its task never publishes.

Only the task process is SIGKILLed (as the kernel's OOM killer does), not its process group: its
spark-submit child lives on as an orphan. The orphan must notice that its task is gone, publish
nothing, remove its own staging and exit within seconds, with no next try to clean up after it.
The one residual window is a kill after the task has sent commit: the publish then goes ahead and
the next try reports ``already_published``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import count, database_dir, leftovers, table_exists
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import Reader, Trial, summarize, wait_for_path
from tests.support.processes import find_processes, wait_for_line
from tests.support.reliability import NEW_ROWS, record_cell

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# 400 rows; in try 1 every row sleeps, so there is a write to interrupt.
SQL = (
    "SELECT id, 'v2' AS version, reflect('java.lang.Thread', 'sleep', "
    "CAST({{ 60 if ti.try_number == 1 else 0 }} AS BIGINT)) AS pause FROM range(0, 400, 1, 4)"
)
ORPHAN_BOUND_SECONDS = 30


def wait_for_orphans(target: str, timeout: float) -> float:
    """Seconds until no Spark driver of ``target`` runs any more."""
    started = time.monotonic()
    while find_processes("org.apache.spark.deploy.SparkSubmit", target):
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"the orphaned driver of {target} still runs after {timeout}s")
        time.sleep(0.2)
    return time.monotonic() - started


def start_try(tmp_path: Any, dag_id: str, faults: dict[str, Any]) -> Trial:
    faults = {"progress_file": str(tmp_path / "progress"), **faults}
    return Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "orphan_run", tmp_path / "try1.log", faults).start()


@pytest.mark.parametrize("when", ["mid-write", "awaiting-decision"])
def test_an_orphaned_driver_never_publishes_and_removes_its_staging(stack, spark, database, tmp_path, when):
    dag_id = f"orphan_{when.replace('-', '_')}"
    target = f"{database}.orphan"
    make_dag(dag_id, target_table=target, sql=SQL)
    faults = {"before_decision": {"sleep": 300, "only_try": 1}} if when == "awaiting-decision" else {}
    txn_id = TransactionKey(dag_id, "ctas", "orphan_run").txn_id
    reader = Reader(spark, target).start()
    trial = start_try(tmp_path, dag_id, faults)
    if when == "mid-write":
        wait_for_path(database_dir(spark, database) / f"__ctas_{txn_id[:16]}_s1" / "_temporary", timeout=240)
        time.sleep(1)
    else:
        wait_for_line(tmp_path / "progress", "before_decision try=1", timeout=240)
    os.kill(trial.pid, signal.SIGKILL)  # the task process only: its driver is orphaned
    orphan_seconds = wait_for_orphans(target, timeout=120)
    time.sleep(3)  # anything the orphan could still have published would show by now
    values = reader.stop()
    left = leftovers(spark, database)
    record_cell(
        f"orphan-{when}",
        {
            "order": 100 if when == "mid-write" else 101,
            "fault": "SIGKILL the task process only (its driver orphaned), retries=0",
            "when": when.replace("-", " "),
            "mode": "create",
            "try1": f"killed; the orphaned driver exited after {orphan_seconds:.1f}s",
            "left1": left,
            "try2": "none",
            "left2": left,
            "seen": summarize(values),
            "rows": None,
            "ok": set(values) <= {"missing"} and not left and orphan_seconds <= ORPHAN_BOUND_SECONDS,
            "seconds": round(orphan_seconds),
            "problem": None,
        },
    )
    assert set(values) <= {"missing"}, f"a reader saw the target: {summarize(values)}"
    assert not table_exists(spark, target)
    assert left == [], f"the orphan left {left}"
    assert orphan_seconds <= ORPHAN_BOUND_SECONDS, f"the orphan ran {orphan_seconds:.1f}s after its task died"


def test_a_task_killed_after_it_decided_commit_publishes_once(stack, spark, database, tmp_path):
    """The documented residual window: commit was sent, then the task died. The driver publishes;
    Airflow records a failure; the next try finds its own publish and reports ``already_published``."""
    dag_id = "orphan_after_commit"
    target = f"{database}.orphan_committed"
    make_dag(dag_id, target_table=target, sql=SQL, retries=1)
    trial = start_try(tmp_path, dag_id, {"before_publish": {"sleep": 5, "only_try": 1}})
    wait_for_line(tmp_path / "progress", "before_publish try=1", timeout=240)
    os.kill(trial.pid, signal.SIGKILL)
    orphan_seconds = wait_for_orphans(target, timeout=120)
    rows = count(spark, target)
    left1 = leftovers(spark, database)
    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "orphan_run", tmp_path / "try2.log").start().wait()
    outcome = (xcom_value(dag_id, "orphan_run", "ctas_transaction") or {}).get("outcome")
    left2 = leftovers(spark, database)
    record_cell(
        "orphan-after-commit",
        {
            "order": 102,
            "fault": "SIGKILL the task process only (its driver orphaned), retries=1",
            "when": "right after the task sent commit",
            "mode": "create",
            "try1": f"killed; the driver published, then exited after {orphan_seconds:.1f}s",
            "left1": left1,
            "try2": f"{second} ({outcome})",
            "left2": left2,
            "seen": "not polled",
            "rows": rows,
            "ok": rows == NEW_ROWS and second == "success" and outcome == "already_published" and not left2,
            "seconds": round(orphan_seconds),
            "problem": None,
        },
    )
    assert rows == NEW_ROWS
    assert second == "success"
    assert outcome == "already_published"
    assert left2 == []
