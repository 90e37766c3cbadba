"""Fault injection with real processes: a try per subprocess, real signals, a live reader."""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.catalog import count
from tests.support.dags import DAGS_FOLDER
from tests.support.processes import find_processes, wait_for_line
from tests.support.trial_zygote import Zygote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]


def classify_read_error(exc: Exception) -> str:
    """Name what a failed read means: no table, files moved under a running scan, or anything else."""
    text = str(exc)
    if "TABLE_OR_VIEW_NOT_FOUND" in text:
        return "missing"
    if "FILE_NOT_EXIST" in text or "FileNotFoundException" in text:
        return "files-gone"
    if "INCOMPATIBLE_TABLE_CHANGE_AFTER_ANALYSIS" in text:
        return "schema-changed"  # Spark 4: a plan resolved on the old columns, scanned after a reshape
    return "unavailable"


def reading_pause(started: float, interval: float) -> float:
    """How long a poller waits after a read that began at ``started``: until ``interval`` after its
    start, and at least as long as the read took."""
    elapsed = time.monotonic() - started
    return max(interval - elapsed, elapsed)


class Reader:
    """Polls a table's row count from the test's own Spark session, recording every observation.

    A read starts every ``interval`` seconds; a read that takes longer than half of that is followed
    by a pause as long as itself (``reading_pause``): on a loaded machine, where reads slow down,
    the reader keeps to half of its thread's time instead of reading back to back and crowding out
    the work it watches.

    ``sticky``: one session for every read, which never refreshes, like a Thrift server or a BI tool
    that keeps the file listing it made first (README: readers that keep a session open). Otherwise
    each read looks at the metastore afresh.
    """

    def __init__(
        self,
        spark: SparkSession,
        target: str,
        interval: float = 1.0,
        where: str = "",
        tail: float = 0.5,
        sticky: bool = False,
    ) -> None:
        self.spark, self.target, self.interval, self.where, self.tail = spark, target, interval, where, tail
        self.sticky = spark.newSession() if sticky else None
        # (started, finished, value) per read: a read spans time, so windows are bounded by both.
        self.seen: list[tuple[float, float, Any]] = []
        # First line of each read error classified "unavailable", so a failure can say what it was.
        self.unavailable: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                value: Any = (
                    _sticky_count(self.sticky, self.target, self.where)
                    if self.sticky is not None
                    else count(self.spark, self.target, self.where)
                )
            except Exception as exc:
                value = classify_read_error(exc)
                if value == "unavailable":
                    self.unavailable.append(str(exc).strip().splitlines()[0][:300])
            self.seen.append((started, time.monotonic(), value))
            self._stop.wait(reading_pause(started, self.interval))

    def start(self) -> Reader:
        self._thread.start()
        return self

    def stop(self) -> list[Any]:
        time.sleep(self.tail)
        self._stop.set()
        self._thread.join(timeout=60)
        return [value for *_, value in self.seen]


def _sticky_count(session: SparkSession, target: str, where: str) -> int:
    condition = f" WHERE {where}" if where else ""
    return int(session.sql(f"SELECT count(*) AS n FROM {target}{condition}").collect()[0]["n"])


def check_observations(values: list[Any], allowed: set[Any], new: Any) -> str | None:
    """None when every observation is allowed and the new version, once seen, stays; else why not."""
    unexpected = sorted({str(v) for v in values} - {str(a) for a in allowed})
    if unexpected:
        return f"reader saw {unexpected}"
    if new in values:
        first = values.index(new)
        after = {str(v) for v in values[first:]} - {str(new), "unavailable"}
        if after:
            return f"after the new version appeared the reader saw {sorted(after)}"
    return None


def summarize(values: list[Any]) -> str:
    """Run-length summary of observations, e.g. 'missing x12 -> 400 x30'."""
    runs: list[list[Any]] = []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    return " -> ".join(f"{value} x{n}" for value, n in runs) or "no observation"


@dataclass
class Trial:
    """One try of a task instance, in its own process group (task process + its spark-submit),
    forked from the worker's warmed try zygote (``tests/support/trial_zygote.py``)."""

    dag_file: Path
    dag_id: str
    run_id: str
    log: Path
    faults: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    task_id: str = "ctas"
    pid: int = 0
    _exited: int | None = None
    """A pidfd: readable once the try's process has exited (it is the zygote's child, not ours)."""

    def start(self) -> Trial:
        env = dict(os.environ)
        env.pop("AIRFLOW_CTAS_FAULTS", None)
        if self.faults:
            env["AIRFLOW_CTAS_FAULTS"] = json.dumps(self.faults)
        env.update(self.env)
        args = [str(self.dag_file), self.dag_id, self.run_id, self.task_id]
        self.pid = Zygote.shared().fork(args, env, str(self.log))
        try:
            self._exited = os.pidfd_open(self.pid)
        except ProcessLookupError:  # over already
            self._exited = None
        return self

    def running(self) -> bool:
        return self._exited is not None and not select.select([self._exited], [], [], 0)[0]

    def wait(self, timeout: float = 600) -> str:
        assert self.pid, "start() first"
        if self._exited is not None:
            ended = select.select([self._exited], [], [], timeout)[0]
            if not ended:
                os.killpg(self.pid, signal.SIGKILL)
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
                raise TimeoutError(f"the try did not end within {timeout}s; the last lines of {self.log}:\n{tail}")
            os.close(self._exited)
            self._exited = None
        for line in reversed(self.log.read_text(errors="replace").splitlines()):
            if line.startswith("TRIAL_STATE "):
                return line.split(" ", 1)[1]
        return "killed (no TRIAL_STATE in its log)"

    def signal_group(self, sig: signal.Signals) -> None:
        os.killpg(self.pid, sig)


@dataclass(frozen=True)
class HeldTries:
    first: str
    second: str
    progress: list[str]
    """The fault points each try reached, in order (``"<point> try=<n>"``)."""
    first_log: str


def older_try_resumed_beside_newer(dag_id: str, run_id: str, held_at: str, tmp_path: Path) -> HeldTries:
    """Try 1 is held at ``held_at`` while its task instance is cleared; try 2 runs beside it and is
    held before its publish; try 1 is released and runs to its end, then try 2."""
    progress, release1, release2 = tmp_path / "progress", tmp_path / "release1", tmp_path / "release2"

    def trial(n: int, faults: dict[str, Any]) -> Trial:
        faults = {"progress_file": str(progress), **faults}
        return Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, run_id, tmp_path / f"try{n}.log", faults).start()

    try:
        first = trial(1, {held_at: {"wait_for": str(release1), "only_try": 1},
                          "after_publish": {"sleep": 0, "only_try": 1}})  # fmt: skip
        wait_for_line(progress, f"{held_at} try=1", timeout=240)
        second = trial(2, {"before_publish": {"wait_for": str(release2), "only_try": 2}})
        wait_for_line(progress, "before_publish try=2", timeout=240)
        release1.touch()
        first_state = first.wait()
    finally:
        release1.touch()
        release2.touch()
    second_state = second.wait()
    first_log = (tmp_path / "try1.log").read_text(errors="replace")
    return HeldTries(first_state, second_state, progress.read_text().splitlines(), first_log)


def wait_for_path(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.05)
    parent = sorted(p.name for p in path.parent.iterdir()) if path.parent.exists() else "(missing too)"
    raise TimeoutError(f"{path} did not appear within {timeout}s; {path.parent} holds {parent}")


def wait_for_drivers_to_exit(needle: str, timeout: float = 120) -> None:
    """Orphaned drivers (their task process was killed) may still run; wait until none does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not find_processes("org.apache.spark.deploy.SparkSubmit", needle):
            return
        time.sleep(0.5)
    running = find_processes("org.apache.spark.deploy.SparkSubmit", needle)
    raise TimeoutError(f"Spark drivers for {needle!r} still run after {timeout}s: pids {running}")
