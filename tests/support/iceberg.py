"""Iceberg for the tests: the runtime jar, the catalog conf a task needs, and an independent reader.

The reader is its own Spark 4.1 JVM with the Iceberg runtime (the main environment's Spark 4.3 has
none), reading through Spark SQL and Iceberg's metadata tables, not through the provider. It answers
JSON requests on stdin, so one JVM serves a whole test module; statements can also run in the
background, as two concurrent writers of plain Spark SQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ctas_devstack.metastore import HiveMetastore
from tests.support.faults import classify_read_error
from tests.support.spark_versions import pyspark_venv

SPARK_FOR_ICEBERG = "4.1.4"
ICEBERG_RUNTIME = "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0"
CATALOG = "ice"

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
        else:
            answer = {"rows": run(request["sql"])}
    except Exception as exc:
        answer = {"error": " ".join(str(exc).splitlines()[:3])}
    print(json.dumps(answer, default=str), flush=True)
"""


def iceberg_jar() -> str:
    return subprocess.run(
        [sys.executable, "scripts/fetch_jars.py", "--path", ICEBERG_RUNTIME], capture_output=True, text=True, check=True
    ).stdout.strip()


def iceberg_conf(metastore: HiveMetastore) -> dict[str, str]:
    """What a task's conf says for an Iceberg catalog on the tests' metastore service, on Spark 4.1."""
    prefix = f"spark.sql.catalog.{CATALOG}"
    return {
        "spark.jars": iceberg_jar(),
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hive",
        f"{prefix}.uri": metastore.uri,
        f"{prefix}.warehouse": metastore.warehouse.as_uri(),
        # pyspark's own metastore service has no ACID lock tables: Iceberg then commits with the
        # metastore's expected-parameter alter_table (Hive 2.3.10), still a compare-and-swap.
        "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
    }


class IcebergReader:
    def __init__(self, metastore: HiveMetastore, log: Path) -> None:
        python = pyspark_venv(SPARK_FOR_ICEBERG) / "bin" / "python"
        self.process = subprocess.Popen(
            # Without Spark's table cache: each read sees what the metastore says now.
            [
                str(python),
                "-c",
                _READER,
                json.dumps({**iceberg_conf(metastore), f"spark.sql.catalog.{CATALOG}.cache-enabled": "false"}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("ab"),
            text=True,
        )
        self._lock = threading.Lock()
        self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the Iceberg reader exited")
        return dict(json.loads(line))

    def request(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        with self._lock:  # a poller thread shares the process
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            return self._answer()

    def rows(self, sql: str) -> list[list[Any]]:
        answer = self.request(sql=sql)
        if "error" in answer:
            raise AssertionError(f"{sql}: {answer['error']}")
        return list(answer["rows"])

    def value(self, sql: str) -> Any:
        return self.rows(sql)[0][0]

    def exists(self, table: str) -> bool:
        database, name = table.split(".")[-2:]
        return any(row[1] == name for row in self.rows(f"SHOW TABLES IN {CATALOG}.{database}"))

    def properties(self, table: str) -> dict[str, str]:
        return {row[0]: row[1] for row in self.rows(f"SHOW TBLPROPERTIES {table}")}

    def branches(self, table: str) -> list[str]:
        return sorted(row[0] for row in self.rows(f"SELECT name FROM {table}.refs WHERE type = 'BRANCH'"))

    def current_summary(self, table: str) -> dict[str, str]:
        """The snapshot summary of ``main``'s current snapshot."""
        self.rows(f"REFRESH TABLE {table}")
        rows = self.rows(
            f"SELECT s.summary FROM {table}.snapshots s JOIN {table}.refs r ON s.snapshot_id = r.snapshot_id "
            "WHERE r.name = 'main'"
        )
        return dict(rows[0][0]) if rows else {}

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


class IcebergPoller:
    """Polls ``<rows>:<max written_by_try>`` of a table through the reader the whole time a test
    runs: a reader must only ever see no table / the old version, or the complete new one, and
    which try wrote what it sees."""

    def __init__(self, reader: IcebergReader, table: str, interval: float = 0.4) -> None:
        self.reader, self.table, self.interval = reader, table, interval
        self.seen: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sql = f"SELECT concat(count(*), ':', coalesce(max(written_by_try), '-')) FROM {self.table}"
        while not self._stop.is_set():
            try:
                self.seen.append(self.reader.value(sql))
            except AssertionError as exc:
                self.seen.append(classify_read_error(exc))
            time.sleep(self.interval)

    def __enter__(self) -> IcebergPoller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(0.5)
        self._stop.set()
        self._thread.join(timeout=60)
