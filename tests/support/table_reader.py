"""An independent reader for table formats the main environment's Spark 4.3 cannot read: its own
Spark 4.1 JVM with the format's runtime, reading through Spark SQL, not through the provider. It
answers JSON requests on stdin, so one JVM serves a whole test module; statements can also run in
the background, as concurrent writers of plain Spark SQL. The metastore comes from the tests'
``SPARK_SUBMIT_OPTS``, as for every Spark JVM they start.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.catalog import described_comments
from tests.support.faults import check_observations, classify_read_error, reading_pause
from tests.support.jvm import READER_SPARK_CONF, classic_environ
from tests.support.spark_versions import SPARK_FOR_FORMATS, on_release

_READER = r"""
import json, sys, threading, traceback
from pyspark.sql import SparkSession
conf = json.loads(sys.argv[1])
builder = SparkSession.builder.master("local[2]").appName("iceberg-reader")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
background = {}

def run(sql):
    return [list(r) for r in spark.sql(sql).collect()]

def background_run(name, sql):
    try:
        background[name] = {"rows": run(sql)}
    except Exception as exc:
        background[name] = {"error": " ".join(str(exc).splitlines()[:3])}

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    try:
        if "background" in request:
            thread = threading.Thread(target=background_run, args=(request["background"], request["sql"]))
            thread.start()
            background[request["background"] + ":thread"] = thread
            answer = {"started": True}
        elif "running" in request:
            answer = {"running": background[request["running"] + ":thread"].is_alive()}
        elif "wait" in request:
            background.pop(request["wait"] + ":thread").join()
            answer = background.pop(request["wait"])
        elif "records" in request:
            answer = {"rows": [r.asDict() for r in spark.sql(request["records"]).collect()]}
        else:
            answer = {"rows": run(request["sql"])}
    except Exception as exc:
        answer = {"error": " ".join(str(exc).splitlines()[:3])}
    print(json.dumps(answer, default=str), flush=True)
"""


class TableReader:
    def __init__(self, conf: dict[str, str], log: Path) -> None:
        env, release_conf = on_release(SPARK_FOR_FORMATS, archive=True)
        self.log = log
        self.process = subprocess.Popen(
            [release_conf["spark.pyspark.python"], "-c", _READER, json.dumps({**READER_SPARK_CONF, **conf})],
            env={**classic_environ(), **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("ab"),
            text=True,
        )
        self._lock = threading.Lock()
        self._ready = False
        """The reader's first line says its session is up; read with the first answer, so that the
        JVM starts while the test goes on."""

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the table reader exited; its log: {self.log}")
        return dict(json.loads(line))

    def request(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        with self._lock:  # a poller thread shares the process
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            if not self._ready:
                self._answer()
                self._ready = True
            return self._answer()

    def rows(self, sql: str) -> list[list[Any]]:
        answer = self.request(sql=sql)
        if "error" in answer:
            raise AssertionError(f"{sql}: {answer['error']}")
        return list(answer["rows"])

    def records(self, sql: str) -> list[dict[str, Any]]:
        """Rows as column name to value (for statements that cannot be a subquery)."""
        answer = self.request(records=sql)
        if "error" in answer:
            raise AssertionError(f"{sql}: {answer['error']}")
        return list(answer["rows"])

    def value(self, sql: str) -> Any:
        return self.rows(sql)[0][0]

    def exists(self, table: str) -> bool:
        namespace, name = table.rsplit(".", 1)
        return any(row[1] == name for row in self.rows(f"SHOW TABLES IN {namespace}"))

    def properties(self, table: str) -> dict[str, str]:
        return {row[0]: row[1] for row in self.rows(f"SHOW TBLPROPERTIES {table}")}

    def comments(self, table: str) -> tuple[str | None, dict[str, str]]:
        return described_comments(self.records(f"DESCRIBE TABLE EXTENDED {table}"))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


class TablePoller:
    """Polls ``<rows>:<max written_by_try>`` of a table through the reader the whole time a test
    runs: a reader must only ever see no table / the old version, or the complete new one, and
    which try wrote what it sees. A read starts every ``interval`` seconds, paced as ``Reader``'s
    (``reading_pause``)."""

    def __init__(self, reader: TableReader, table: str, interval: float = 1.2, rows_only: bool = False) -> None:
        """``rows_only``: read the row count alone (a table without ``written_by_try``)."""
        self.reader, self.table, self.interval = reader, table, interval
        self.sql = (
            f"SELECT count(*) FROM {table}"
            if rows_only
            else f"SELECT concat(count(*), ':', coalesce(max(written_by_try), '-')) FROM {table}"
        )
        self.seen: list[Any] = []
        self.unavailable: list[str] = []
        """The error of each read classified ``unavailable``, so a failure can say what it was."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.seen.append(self.reader.value(self.sql))
            except AssertionError as exc:
                self.seen.append(classify_read_error(exc))
                if self.seen[-1] == "unavailable":
                    self.unavailable.append(" ".join(str(exc).split())[:600])
            self._stop.wait(reading_pause(started, self.interval))

    def problem(self, allowed: set[Any], new: Any) -> str | None:
        """``check_observations`` of what it saw, with the errors of the reads it found unavailable."""
        problem = check_observations(self.seen, allowed, new)
        return f"{problem} (unavailable: {self.unavailable})" if problem and self.unavailable else problem

    def start(self) -> TablePoller:
        self._thread.start()
        return self

    def stop(self) -> list[Any]:
        """Stops after one more read's time; what it saw."""
        time.sleep(0.5)
        self._stop.set()
        self._thread.join(timeout=60)
        return self.seen

    def __enter__(self) -> TablePoller:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
