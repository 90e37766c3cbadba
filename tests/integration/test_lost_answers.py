"""Every publishing metastore call of the session catalog with its answer lost: a proxy in front of
the metastore service (``ctas_devstack/fault_proxy.py``) lets the call through, waits until the
metastore has answered, and closes the driver's connection instead of passing the answer on, as a
client timeout or a dropped connection does. Hive's client then connects again and sends the call
once more; a call that is not idempotent (a rename, adding partitions) is refused the second time.

The task must still decide from what the metastore shows: a try whose publish applied succeeds and
leaves nothing behind; it never fails with its version published, never loses the table. A reader
polls the table throughout; each call is a cell of the generated fault matrix.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import pytest

from ctas_devstack.fault_proxy import FaultProxy
from tests.support.catalog import count, leftovers, location_uri, partition_locations, table_exists
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import Reader, Trial, check_observations, summarize
from tests.support.processes import wait_for_line
from tests.support.reliability import record_cell

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.faults]


@dataclass(frozen=True)
class Step:
    cell: str
    call: str
    """The Thrift method whose answer is lost (the first one after ``point``)."""
    point: str
    mode: str
    sql: str
    rows: int
    swap: bool = False
    partitioned: bool = True
    """On the partitioned table the steps before made; else on a table of its own, seeded with 5 rows."""


STEPS = [
    Step("rename", "alter_table", "publish_before_rename", "create",
         "SELECT id, CAST(id % 2 AS STRING) AS k FROM range(100)", 100),
    Step("partitions-added", "add_partitions", "publish_checked", "overwrite_partitions",
         "SELECT id, '2' AS k FROM range(10)", 110),
    Step("swap-move-aside", "alter_table", "publish_before_move_aside", "replace",
         "SELECT id, 'x' AS extra, CAST(id % 2 AS STRING) AS k FROM range(80)", 80, swap=True),
    Step("swap-rename-in", "alter_table", "publish_after_move_aside", "replace",
         "SELECT id, CAST(id % 3 AS STRING) AS k FROM range(60)", 60, swap=True),
    # A flip replaces an unpartitioned table (a partitioned one is swapped or has its partitions switched).
    Step("flip", "alter_table", "publish_checked", "replace", "SELECT id, 'v2' AS v FROM range(120)", 120,
         partitioned=False),
]  # fmt: skip


def _allowed(step: Step, before: int | None, partial: set[int]) -> set[Any]:
    allowed: set[Any] = {step.rows, "missing" if before is None else before}
    if step.swap:  # README's window of a swap: missing, or a read that straddled a rename
        allowed |= {"missing", 0, "files-gone", "unavailable"} | partial
    return allowed


def _partial_old_versions(spark: Any, target: str) -> set[int]:
    """What a read straddling a swap's first rename can count of the old version (README: the
    swap's window): the partitions outside the table's directory (switched in by an earlier
    ``overwrite_partitions``), plus any of those inside that it read before they moved with it."""
    if not table_exists(spark, target):
        return set()
    own = location_uri(spark, target).rstrip("/") + "/"
    inside, outside = [], 0
    for name, where in partition_locations(spark, target).items():
        rows = count(spark, target, f"k = '{name.split('=', 1)[1]}'")
        if where.startswith(own):
            inside.append(rows)
        else:
            outside += rows
    return {outside + sum(read) for n in range(len(inside) + 1) for read in itertools.combinations(inside, n)}


def test_a_publish_whose_metastore_answer_is_lost_is_decided_from_the_metastore(
    stack, spark, database, metastore, tmp_path
):
    proxy = FaultProxy(("127.0.0.1", metastore.port)).start()
    conf = {"spark.hadoop.hive.metastore.uris": f"thrift://127.0.0.1:{proxy.port}"}
    before: int | None = None
    failures = []
    try:
        for order, step in enumerate(STEPS):
            dag_id = f"lost_{step.cell.replace('-', '_')}"
            target = f"{database}.lost_answers" if step.partitioned else f"{database}.lost_{step.cell}"
            if not step.partitioned:
                spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 'v1' AS v FROM range(5)")
                before = 5
            make_dag(dag_id, target_table=target, mode=step.mode, sql=step.sql, allow_swap=step.swap, conf=conf,
                     partition_by=["k"] if step.partitioned else [])  # fmt: skip
            progress, release = tmp_path / f"{dag_id}.progress", tmp_path / f"{dag_id}.release"
            faults = {"progress_file": str(progress), step.point: {"wait_for": str(release)}}
            log = tmp_path / f"{dag_id}.log"
            partial = _partial_old_versions(spark, target) if step.swap else set()
            reader = Reader(spark, target).start()
            started = time.monotonic()
            trial = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "lost", log, faults).start()
            wait_for_line(progress, f"{step.point} try=1", timeout=240)
            lost = len(proxy.lost)
            proxy.lose_answer(step.call)
            release.touch()
            state = trial.wait()
            values = reader.stop()
            txn = xcom_value(dag_id, "lost", "ctas_transaction") or {}
            rows, left = count(spark, target), leftovers(spark, database)
            problem = check_observations(values, _allowed(step, before, partial), step.rows)
            landed = len(proxy.lost) == lost + 1
            unconfirmed = txn.get("details", {}).get("unconfirmed_calls", [])
            ok = (state, txn.get("outcome"), rows) == ("success", "published", step.rows) and landed
            record_cell(
                f"metastore-answer-lost-{step.cell}",
                {
                    "order": 140 + order,
                    "fault": f"the metastore's answer to the publish ({step.call}) lost: a proxy closes the "
                    "driver's connection once the metastore has answered; Hive's client sends the call again",
                    "when": f"publish ({step.cell.replace('-', ' ')})",
                    "mode": step.mode if not step.swap else "swap",
                    "try1": f"{state} ({txn.get('outcome')})"
                    + (f"; read again after a refused resend: {', '.join(unconfirmed)}" if unconfirmed else ""),
                    "left1": left,
                    "try2": "none",
                    "left2": left,
                    "seen": summarize(values),
                    "rows": rows,
                    "ok": ok and problem is None and not left,
                    "seconds": round(time.monotonic() - started),
                    "problem": problem,
                },
            )
            if not (ok and problem is None and not left):
                tail = log.read_text(errors="replace")[-2500:]
                failures.append(f"{step.cell}: {state} {txn.get('outcome')} rows={rows} left={left} "
                                f"lost={proxy.lost[lost:]} {problem}\n{tail}")  # fmt: skip
                break
            before = step.rows
    finally:
        proxy.stop()
    assert not failures, failures[0]
