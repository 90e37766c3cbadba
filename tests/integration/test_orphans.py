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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import count, database_dir, leftovers, table_exists
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import REPO, Reader, Trial, check_observations, summarize, wait_for_path
from tests.support.processes import find_processes, wait_for_line
from tests.support.reliability import NEW_ROWS, record_cell

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.faults]

# 400 rows; in try 1 every row sleeps, so there is a write to interrupt.
SQL = (
    "SELECT id, 'v2' AS version, reflect('java.lang.Thread', 'sleep', "
    "CAST({{ 60 if ti.try_number == 1 else 0 }} AS BIGINT)) AS pause FROM range(0, 400, 1, 4)"
)
ORPHAN_BOUND_SECONDS = 30


def wait_for_orphan_of_try(target: str, try_number: int, timeout: float) -> float:
    """Seconds until no Spark driver of ``target``'s try ``try_number`` runs any more."""
    started = time.monotonic()
    while find_processes("org.apache.spark.deploy.SparkSubmit", f"{target} try {try_number}"):
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"the orphaned driver of {target} try {try_number} still runs after {timeout}s")
        time.sleep(0.2)
    return time.monotonic() - started


def deliver_callback(dag_file: str, dag_id: str, log: Path) -> subprocess.Popen[bytes]:
    """A DAG-processor-like process running the task's failure callbacks (see tests.support.callback)."""
    handle = open(log, "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.callback", dag_file, dag_id, "orphan_run"],
        cwd=REPO,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )


def start_try(tmp_path: Any, dag_id: str, faults: dict[str, Any]) -> Trial:
    faults = {"progress_file": str(tmp_path / "progress"), **faults}
    return Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "orphan_run", tmp_path / "try1.log", faults).start()


# Try 2 beside a live orphan (retries=1) does not depend on where the orphan was: mid-write shows it.
@pytest.mark.parametrize(("when", "retries"), [("mid-write", 0), ("mid-write", 1), ("awaiting-decision", 0)])
def test_an_orphaned_driver_never_publishes_and_removes_its_staging(stack, spark, database, tmp_path, when, retries):
    """With ``retries=1`` try 2 starts the moment try 1's task dies, beside the still-running orphan:
    the orphan must not hold it up, and try 2 alone publishes."""
    dag_id = f"orphan_{when.replace('-', '_')}_r{retries}"
    target = f"{database}.orphan_r{retries}"
    make_dag(dag_id, target_table=target, sql=SQL, retries=retries)
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
    second = None
    if retries:
        second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "orphan_run", tmp_path / "try2.log").start()
    orphan_seconds = wait_for_orphan_of_try(target, 1, timeout=120)
    second_state = second.wait() if second else "none"
    time.sleep(3)  # anything the orphan could still have published would show by now
    values = reader.stop()
    left = leftovers(spark, database)
    rows = count(spark, target) if retries else None
    expected_seen = {"missing", NEW_ROWS} if retries else {"missing"}
    problem = check_observations(values, expected_seen, NEW_ROWS)
    outcome = (xcom_value(dag_id, "orphan_run", "ctas_transaction") or {}).get("outcome") if retries else None
    record_cell(
        f"orphan-{when}-r{retries}",
        {
            "order": 100 + 2 * (when != "mid-write") + retries,
            "fault": f"SIGKILL the task process only (its driver orphaned), retries={retries}",
            "when": when.replace("-", " ") + ("; try 2 starts at once, beside the orphan" if retries else ""),
            "mode": "create",
            "try1": f"killed; the orphaned driver exited after {orphan_seconds:.1f}s",
            "left1": ["not inspected: try 2 already running"] if retries else left,
            "try2": f"{second_state} ({outcome})" if retries else "none",
            "left2": left,
            "seen": summarize(values),
            "rows": rows,
            "ok": problem is None
            and not left
            and orphan_seconds <= ORPHAN_BOUND_SECONDS
            and (not retries or (rows == NEW_ROWS and second_state == "success" and outcome == "published")),
            "seconds": round(orphan_seconds),
            "problem": problem,
        },
    )
    assert problem is None, problem
    assert left == [], f"left behind: {left}"
    assert orphan_seconds <= ORPHAN_BOUND_SECONDS, f"the orphan ran {orphan_seconds:.1f}s after its task died"
    if retries:
        assert (second_state, outcome, rows) == ("success", "published", NEW_ROWS)
    else:
        assert not table_exists(spark, target)


def test_a_failure_callback_delivered_twice_and_late_never_touches_the_next_try(stack, spark, database, tmp_path):
    """Issue 14's second probe: the worker of try 1 is lost (task process and driver SIGKILLed), try 2
    starts, and the lost try's failure callback arrives through the DAG processor's own code path
    twice while try 2 runs, built from the task instance row, which by then names try 2. Try 2 must
    publish untouched."""
    started = time.monotonic()
    dag_id = "orphan_callback"
    target = f"{database}.orphan_callback"
    sql = SQL.replace("60 if ti.try_number == 1 else 0", "60 if ti.try_number == 1 else 30")
    make_dag(dag_id, target_table=target, sql=sql, retries=1)
    txn_id = TransactionKey(dag_id, "ctas", "orphan_run").txn_id
    dag_file = str(DAGS_FOLDER / f"{dag_id}.py")
    database_path = database_dir(spark, database)
    reader = Reader(spark, target).start()
    first = start_try(tmp_path, dag_id, {})
    wait_for_path(database_path / f"__ctas_{txn_id[:16]}_s1" / "_temporary", timeout=240)
    first.signal_group(signal.SIGKILL)  # the whole worker: task process and its driver
    release = tmp_path / "release_try2"
    second = Trial(
        Path(dag_file),
        dag_id,
        "orphan_run",
        tmp_path / "try2.log",
        {"progress_file": str(tmp_path / "progress"), "after_prepare": {"wait_for": str(release), "only_try": 2}},
    ).start()
    wait_for_path(database_path / f"__ctas_{txn_id[:16]}_s2" / "_temporary", timeout=240)
    during_write = deliver_callback(dag_file, dag_id, tmp_path / "callback1.log")
    during_write.wait(timeout=180)
    wait_for_line(tmp_path / "progress", "after_prepare try=2", timeout=240)
    late = deliver_callback(dag_file, dag_id, tmp_path / "callback2.log")
    late.wait(timeout=180)
    staging_survived = (database_path / f"__ctas_{txn_id[:16]}_s2").exists()
    in_flight = second.running()
    release.touch()
    second_state = second.wait()
    values = reader.stop()
    rows = count(spark, target)
    outcome = (xcom_value(dag_id, "orphan_run", "ctas_transaction") or {}).get("outcome")
    left = leftovers(spark, database)
    deliveries = [(tmp_path / f"callback{n}.log").read_text(errors="replace") for n in (1, 2)]
    delivered = all("CALLBACK_DELIVERED try=2" in text and "did not run in this process" in text for text in deliveries)
    problem = check_observations(values, {"missing", NEW_ROWS}, NEW_ROWS)
    record_cell(
        "orphan-callback-twice",
        {
            "order": 105,
            "fault": "SIGKILL the task process and its driver (worker lost), retries=1; the failure callback "
            "delivered twice through the DAG processor's code path",
            "when": "mid-write; callbacks while try 2 writes and while it holds its staging before publish",
            "mode": "create",
            "try1": "killed (exit -9)",
            "left1": ["not inspected: try 2 already running"],
            "try2": f"{second_state} ({outcome}); staging kept through both callbacks: {staging_survived}",
            "left2": left,
            "seen": summarize(values),
            "rows": rows,
            "ok": problem is None
            and delivered
            and staging_survived
            and in_flight
            and (second_state, outcome, rows) == ("success", "published", NEW_ROWS)
            and not left,
            "seconds": round(time.monotonic() - started),
            "problem": problem,
        },
    )
    assert delivered, f"a callback did not run as the DAG processor runs it: {deliveries}"
    assert in_flight, "try 2 finished before the late callback: the cell did not test what it says"
    assert staging_survived, "a callback of try 1 removed try 2's staging"
    assert (second_state, outcome, rows) == ("success", "published", NEW_ROWS)
    assert problem is None, problem
    assert left == [], f"left behind: {left}"


def test_a_task_killed_after_it_decided_commit_publishes_once(stack, spark, database, tmp_path):
    """The documented residual window: commit was sent, then the task died. The driver publishes;
    Airflow records a failure; the next try finds its own publish and reports ``already_published``."""
    dag_id = "orphan_after_commit"
    target = f"{database}.orphan_committed"
    make_dag(dag_id, target_table=target, sql=SQL, retries=1)
    trial = start_try(tmp_path, dag_id, {"before_publish": {"sleep": 5, "only_try": 1}})
    wait_for_line(tmp_path / "progress", "before_publish try=1", timeout=240)
    os.kill(trial.pid, signal.SIGKILL)
    orphan_seconds = wait_for_orphan_of_try(target, 1, timeout=120)
    rows = count(spark, target)
    left1 = leftovers(spark, database)
    record_cell(
        "orphan-after-commit-r0",
        {
            "order": 103.5,
            "fault": "SIGKILL the task process only (its driver orphaned), retries=0",
            "when": "right after the task sent commit (observed before any next try: what retries=0 ends with)",
            "mode": "create",
            "try1": f"killed; the driver published, then exited after {orphan_seconds:.1f}s",
            "left1": left1,
            "try2": "none",
            "left2": left1,
            "seen": "not polled",
            "rows": rows,
            "ok": rows == NEW_ROWS and not left1,
            "seconds": round(orphan_seconds),
            "problem": None,
        },
    )
    second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "orphan_run", tmp_path / "try2.log").start().wait()
    outcome = (xcom_value(dag_id, "orphan_run", "ctas_transaction") or {}).get("outcome")
    left2 = leftovers(spark, database)
    record_cell(
        "orphan-after-commit",
        {
            "order": 104,
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
