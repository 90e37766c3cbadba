"""The fault scenarios that the Iceberg and Delta tests run the same way through the real operator,
each format saying how to read its leftovers and its history (``FormatProbe``)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import Trial, summarize, wait_for_drivers_to_exit
from tests.support.processes import kill_spark_driver, wait_for_line
from tests.support.reliability import record_cell
from tests.support.table_reader import TablePoller, TableReader
from tests.support.waiting import wait_until


@dataclass
class FormatProbe:
    table_format: str
    reader: TableReader
    leftovers: Callable[[], list[str]]
    """What tries of this format may leave: staging tables, branches, fences, directories."""
    versions: Callable[[str], int]
    """How many versions (snapshots, commits) the table has."""


def record_format_cell(
    probe: FormatProbe, cell: str, fault: str, mode: str, tries: str, left: list[str], seen: list[Any],
    problem: str | None, started: float,
) -> None:  # fmt: skip
    record_cell(
        f"{probe.table_format}-{cell}",
        {
            "table": probe.table_format,
            "order": cell,
            "fault": fault,
            "mode": mode,
            "tries": tries,
            "left": left,
            "seen": summarize(seen),
            "ok": problem is None and not left,
            "problem": problem,
            "seconds": round(time.monotonic() - started),
        },
    )


def kill_mid_write_then_after_publish(
    probe: FormatProbe, target: str, mode: str, conf: dict[str, str], tmp_path: Path,
    files_written: Callable[[], bool] = lambda: True,
) -> dict[str, Any]:  # fmt: skip
    """Try 1's driver is SIGKILLed mid-write (once ``files_written``); try 2's task process is
    SIGKILLed right after its publish; try 3 runs without a fault. Records the cell; returns what
    the test asserts on. The rows have columns ``id, written_by_try, pause`` and, for
    ``overwrite_partitions``, ``part`` (always 'p', the partition overwritten)."""
    dag_id = f"{probe.table_format.replace('-', '_')}_kill_{mode}"
    slow = "reflect('java.lang.Thread', 'sleep', CAST({{ 200 if ti.try_number == 1 else 0 }} AS BIGINT))"
    written_by = "CAST({{ ti.try_number }} AS BIGINT) AS written_by_try"
    dag: dict[str, Any] = {"partition_by": ["part"]} if mode == "overwrite_partitions" else {}
    part = ", 'p' AS part" if dag else ""
    sql = f"SELECT id, {written_by}, {slow} AS pause{part} FROM range(0, 200, 1, 2)"
    make_dag(dag_id, retries=3, target_table=target, mode=mode, sql=sql, conf=conf,
             table_format=probe.table_format.split("-")[0], **dag)  # fmt: skip
    progress = tmp_path / "progress"

    def trial(n: int, faults: dict[str, Any]) -> Trial:
        log = tmp_path / f"try{n}.log"
        return Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, f"kill_{mode}", log, faults).start()

    started = time.monotonic()
    with TablePoller(probe.reader, target) as poller:
        first = trial(1, {"progress_file": str(progress), "before_write": {"only_try": 1}})
        wait_for_line(progress, "before_write try=1", timeout=240)
        wait_until("try 1's write starts", files_written, timeout=120)
        time.sleep(5)
        assert kill_spark_driver(f"{target} try 1")
        try1 = first.wait()
        wait_for_drivers_to_exit(target)
        left1 = probe.leftovers()
        published_before = probe.reader.exists(target)

        second = trial(2, {"progress_file": str(progress), "after_publish": {"sleep": 60, "only_try": 2}})
        wait_for_line(progress, "after_publish try=2", timeout=240)
        second.signal_group(signal.SIGKILL)
        try2 = second.wait()
        wait_for_drivers_to_exit(target)
        versions = probe.versions(target)
        try3 = trial(3, {}).wait()
    new_versions = probe.versions(target) - versions
    left = probe.leftovers()
    old = "missing" if mode == "create" else "5:0"  # an existing target has 5 rows written by no try
    problem = poller.problem({old, "200:2"}, "200:2")
    record_format_cell(
        probe, f"kill-{mode}", "SIGKILL the Spark driver mid-write (try 1); SIGKILL the task process right after "
        "its publish (try 2); try 3 without a fault", mode,
        f"try 1: {try1}, left {left1 or 'nothing'}; try 2: {try2}; try 3: {try3}, {new_versions} new versions",
        left, poller.seen, problem, started,
    )  # fmt: skip
    return {
        "try1": try1, "try3": try3, "left1": left1, "left": left, "published_before": published_before,
        "new_versions": new_versions, "problem": problem, "seen": poller.seen,
    }  # fmt: skip


def race_two_creators(
    probe: FormatProbe, target: str, conf: dict[str, str], tmp_path: Path, name: str = "race",
    while_claimed: Callable[[], None] | None = None, **dag: Any,
) -> dict[int, str]:  # fmt: skip
    """Two task instances (writer 1: 100 rows, writer 2: 200, column ``writer``) create ``target``;
    both wait at their publish for the same release. With ``while_claimed``, writer 1 goes first and
    is held inside its claim on the name, right before its rename; writer 2 is then released, and
    ``while_claimed()`` runs once writer 2 has reached its own rename (and waits for the claim) or
    ended; then writer 1 goes on. Returns each
    writer's task state."""
    release, progress, claimed = tmp_path / "release", tmp_path / "progress", tmp_path / "claimed"
    trials = {}
    try:
        # Started one after the other (two task processes registering DAGs at once collide in
        # Airflow's database).
        for n in (1, 2):
            dag_id = f"{probe.table_format}_{name}_{n}"
            make_dag(dag_id, target_table=target, sql=f"SELECT id, {n} AS writer FROM range({n * 100})",
                     table_format=probe.table_format, conf=conf, **dag)  # fmt: skip
            # With while_claimed writer 2 goes on only once writer 1 holds its claim.
            go = release if while_claimed is None or n == 1 else claimed.with_suffix(".taken")
            faults: dict[str, Any] = {"progress_file": str(progress), "before_publish": {"wait_for": str(go)}}
            if while_claimed is not None and n == 1:
                faults["publish_before_rename"] = {"wait_for": str(claimed)}
            log = tmp_path / f"writer{n}.log"
            trials[n] = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "race", log, faults).start()
            wait_for_line(progress, "before_publish try=1", timeout=240, count=n)
    finally:
        release.touch()
    if while_claimed is not None:
        try:
            wait_for_line(progress, "publish_before_rename try=1", timeout=240)
            claimed.with_suffix(".taken").touch()
            wait_until("writer 2 at its rename, waiting for writer 1's claim (or ended)",
                       lambda: not trials[2].running() or "waiting for transaction" in trials[2].log.read_text(
                           errors="replace"), timeout=240)  # fmt: skip
            while_claimed()
        finally:
            claimed.with_suffix(".taken").touch()
            claimed.touch()
    states = {n: trial.wait() for n, trial in trials.items()}
    for n, state in states.items():
        if state != "success":  # shown with a failing test's captured output
            tail = trials[n].log.read_text(errors="replace").splitlines()[-40:]
            print(f"writer {n} ended {state}; the end of its log:", *tail, sep="\n")
    return states


def one_winner(probe: FormatProbe, states: dict[int, str]) -> tuple[int, dict[str, Any]]:
    """The writer that published, and the error of the one that did not."""
    assert sorted(states.values()) == ["failed", "success"], states
    winner = next(n for n, state in states.items() if state == "success")
    loser = xcom_value(f"{probe.table_format}_race_{3 - winner}", "race", "ctas_transaction")
    return winner, loser["details"]["error"]


def kill_task_at(
    dag_id: str, run_id: str, point: str, target: str, tmp_path: Path, until: Callable[[], bool] | None = None
) -> None:
    """Runs try 1 of ``dag_id`` until its fault point ``point`` (and on, until ``until()`` holds,
    when given: mid-write), then SIGKILLs its task and driver (their process group): no abort runs,
    no retry, as when a worker is lost."""
    progress = tmp_path / "progress"
    action = {"only_try": 1} if until is not None else {"wait_for": str(tmp_path / "never")}
    trial = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / "try1.log",
                  {"progress_file": str(progress), point: action}).start()  # fmt: skip
    wait_for_line(progress, f"{point} try=1", timeout=240)
    if until is not None:
        wait_until(f"{dag_id}: what the kill waits for", until, timeout=120)
    trial.signal_group(signal.SIGKILL)
    trial.wait()
    wait_for_drivers_to_exit(target)


def zombie_in_publish_window(
    probe: FormatProbe, target: str, conf: dict[str, str], tmp_path: Path, dag_id: str, reshape: bool = False
) -> dict[str, Any]:
    """Try 1 is a zombie (its task still answers commit) that has checked its fence and is about to
    send its publish commit (``publish_checked``); try 2 begins right then (removing try 1's branch,
    raising its own fence) and stops after its write, so ``main`` has not moved; try 1's commit must
    now be refused by the catalog itself; then try 2 publishes. The target is created here with 5
    rows written by no try; with ``reshape``, the tries' query changes its ``id`` to a string (a
    replace that changes the table's shape). Records the cell; returns what the test asserts on."""
    probe.reader.rows(
        f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(5)"
    )
    column = "CAST(id AS STRING) AS id" if reshape else "id"
    sql = f"SELECT {column}, CAST({{{{ ti.try_number }}}} AS BIGINT) AS written_by_try FROM range(100)"
    make_dag(dag_id, retries=3, target_table=target, mode="replace", sql=sql, table_format="iceberg", conf=conf)
    progress, release1, release2 = tmp_path / "progress", tmp_path / "release1", tmp_path / "release2"
    dag_file = DAGS_FOLDER / f"{dag_id}.py"
    started = time.monotonic()
    with TablePoller(probe.reader, target) as poller:
        faults1 = {"progress_file": str(progress), "publish_checked": {"wait_for": str(release1), "only_try": 1}}
        first = Trial(dag_file, dag_id, "zombie_run", tmp_path / "try1.log", faults1).start()
        wait_for_line(progress, "publish_checked try=1", timeout=240)
        faults2 = {"progress_file": str(progress), "after_prepare": {"wait_for": str(release2), "only_try": 2}}
        second = Trial(dag_file, dag_id, "zombie_run", tmp_path / "try2.log", faults2).start()
        wait_for_line(progress, "after_prepare try=2", timeout=240)
        release1.touch()
        wait_for_line(progress, "result phases=begin,prepare,commit ok=False FENCED", timeout=120)
        published_by_try1 = probe.reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") != [[0]]
        release2.touch()
        second_state = second.wait()
        first_state = first.wait()
        wait_for_drivers_to_exit(target)
    left = probe.leftovers()
    # A read straddling a reshape's commit may fail on its changed columns (README: Limits).
    problem = poller.problem({"5:0", "100:2"} | ({"schema-changed"} if reshape else set()), "100:2")
    if published_by_try1:
        problem = f"try 1 published before try 2 did; {problem or ''}"
    record_format_cell(
        probe, "zombie-reshape" if reshape else "zombie",
        "try 1 a zombie (its task still answers commit) between its fence check and its publish commit; try 2 "
        "begins there, then publishes", "replace (new column type)" if reshape else "replace",
        f"try 1: {first_state} (FENCED); try 2: {second_state}",
        left, poller.seen, problem, started,
    )  # fmt: skip
    decided = "commit: the task decided commit for try 1" in (tmp_path / "try1.log").read_text(errors="replace")
    return {"try1": first_state, "try2": second_state, "try1_decided_commit": decided, "left": left,
            "seen": poller.seen, "problem": problem}  # fmt: skip


def assert_zombie_fenced(reader: TableReader, target: str, result: dict[str, Any]) -> None:
    """What ``zombie_in_publish_window`` must show on every catalog: try 1 decided commit and was
    refused, try 2 published its rows alone, nothing is left, and the reader saw old or new only."""
    assert result["try2"] == "success" and result["try1_decided_commit"], result
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert result["left"] == []
    assert result["problem"] is None, f"{summarize(result['seen'])}: {result['problem']}"
