"""Side-by-side benchmark: plain CTAS vs AtomicCtasOperator vs staging-then-copy, interleaved.

    bash benchmarks/run.sh                      # sizes 1e6 1e7 1e8, 3 repeats: build/reports/benchmarks.md + .png
    bash benchmarks/run.sh --sizes 1e6 --repeats 1 --out /tmp/bench.md --plot /tmp/bench.png

Every run is a real one-task DAG run (``dag.test()`` in a fresh Python process) on the embedded
default (local[2] Spark, embedded Derby metastore, Airflow on SQLite), in the order
A B C ... A B C ... so that drift in the machine hits every approach alike. Per run it records the
wall time of the DAG run, the bytes written to the warehouse (files whose mtime falls in the run,
plus the bytes of staging that the run wrote and deleted), the publish step's time, the peak RSS of
the Airflow task process, and how many Spark applications the task submitted.

The Spark Connect approaches run against a Spark Connect server (local[2], its own embedded Derby
metastore and warehouse under ``<root>/connect``) that the benchmark starts once and keeps up, as a
Connect deployment would: those runs start no JVM at all.

The report goes to build/reports/benchmarks.md, or build/reports/formats.md when the run's approaches
are the Iceberg/Delta ones (``iceberg_*``, ``delta_*``: the formats' world, another Spark), with its
plot beside it and a history marker (the run's date, commit and each approach's median wall over its
baseline's, per size); ``bash scripts/publish_reports.sh`` copies it into docs/ with its history
table (ctas_devstack/reports.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pendulum

from ctas_devstack import reports

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
DATABASE = "bench"
APPROACHES = {
    "plain": "(a) SparkSubmitOperator, plain CTAS partitioned by country (not atomic)",
    "plain_flat": "(a') SparkSubmitOperator, plain CTAS unpartitioned (not atomic)",
    "plain_overwrite": "(a_o) SparkSubmitOperator, plain INSERT OVERWRITE of a table's partitions (not atomic)",
    "plain_overwrite_flat": "(a_o') SparkSubmitOperator, plain INSERT OVERWRITE, unpartitioned (not atomic)",
    "atomic_create": "(b) AtomicCtasOperator, mode=create (partitioned)",
    "atomic_create_checks": "(b) AtomicCtasOperator, mode=create (partitioned), checks: row count, 2 not-null, unique",
    "atomic_create_checks_in_write": (
        "(b) AtomicCtasOperator, mode=create (partitioned), checks the write measures: "
        "row count, 2 not-null, accepted values, value range"
    ),
    "atomic_replace_flip": "(b) AtomicCtasOperator, mode=replace, same shape (unpartitioned): flip, the default",
    "atomic_replace_swap": "(b) AtomicCtasOperator, mode=replace, partitioned: swap (opt-in, allow_swap)",
    "atomic_overwrite_partitions": "(b) AtomicCtasOperator, mode=overwrite_partitions",
    "staging_copy": "(c) staging table, then copy into the target",
    "connect_plain": "(a_c) plain CTAS over the same Spark Connect server, partitioned (not atomic)",
    "connect_plain_flat": "(a_c') plain CTAS over the same Spark Connect server, unpartitioned (not atomic)",
    "connect_plain_overwrite_flat": (
        "(a_co') plain INSERT OVERWRITE over the same Spark Connect server, unpartitioned (not atomic)"
    ),
    "connect_create": "(b) over Spark Connect, mode=create (partitioned)",
    "connect_replace_flip": "(b) over Spark Connect, mode=replace, same shape (unpartitioned): flip",
    "connect_replace_swap": "(b) over Spark Connect, mode=replace, partitioned: swap (opt-in)",
    "connect_overwrite_partitions": "(b) over Spark Connect, mode=overwrite_partitions",
    "s3_plain": "(a_s3) plain CTAS on S3, partitioned (not atomic)",
    "s3_plain_flat": "(a_s3') plain CTAS on S3, unpartitioned (not atomic)",
    "s3_atomic_create": "(b) on S3, mode=create (partitioned): external staging, metadata-only rename",
    "s3_atomic_replace_flip": "(b) on S3, mode=replace, same shape (unpartitioned): flip",
    "s3_atomic_overwrite_partitions": "(b) on S3, mode=overwrite_partitions",
    "iceberg_plain": "(a_i) plain CTAS of an Iceberg table, unpartitioned (atomic in one job, not across tries)",
    "iceberg_plain_rtas": "(a_i') plain CREATE OR REPLACE of an Iceberg table (last committer wins)",
    "iceberg_create": "(b) Iceberg, mode=create: staging table, catalog rename",
    "iceberg_replace": "(b) Iceberg, mode=replace: fenced branch, fast-forward",
    "iceberg_rest_plain": "(a_r) plain CTAS of an Iceberg table on a REST catalog, unpartitioned",
    "iceberg_rest_plain_rtas": "(a_r') plain CREATE OR REPLACE of an Iceberg table on a REST catalog",
    "iceberg_rest_plain_part": "(a_rp) plain CTAS of an Iceberg table on a REST catalog, partitioned",
    "iceberg_rest_plain_overwrite": "(a_rp') plain INSERT OVERWRITE (dynamic) of partitions, REST catalog",
    "iceberg_rest_create": "(b) Iceberg on a REST catalog, mode=create: staging table, catalog rename",
    "iceberg_rest_replace": "(b) Iceberg on a REST catalog, mode=replace: fenced branch, requirements",
    "iceberg_rest_overwrite_partitions": "(b) Iceberg on a REST catalog, mode=overwrite_partitions",
    "delta_plain": "(a_d) plain CTAS of a Delta table, unpartitioned (atomic in one job, not across tries)",
    "delta_plain_rtas": "(a_d') plain CREATE OR REPLACE of a Delta table",
    "delta_create": "(b) Delta, mode=create: staging table, catalog rename",
    "delta_replace": "(b) Delta, mode=replace: one fenced Delta commit",
}
FORMATS = ("iceberg", "delta")
"""Approaches named ``<format>_...`` run in the formats' world (Spark 4.1.4, a metastore service)."""
# Each approach is compared with the plain CTAS of the same query, shape and transport.
BASELINE = {
    "plain": "plain",
    "plain_flat": "plain_flat",
    "plain_overwrite": "plain_overwrite",
    "plain_overwrite_flat": "plain_overwrite_flat",
    "atomic_create": "plain",
    "atomic_create_checks": "plain",
    "atomic_create_checks_in_write": "plain",
    "atomic_replace_flip": "plain_flat",
    "atomic_replace_swap": "plain",
    "atomic_overwrite_partitions": "plain",
    "staging_copy": "plain",
    "connect_plain": "connect_plain",
    "connect_plain_flat": "connect_plain_flat",
    "connect_plain_overwrite_flat": "connect_plain_overwrite_flat",
    "connect_create": "connect_plain",
    "connect_replace_flip": "connect_plain_flat",
    "connect_replace_swap": "connect_plain",
    "connect_overwrite_partitions": "connect_plain",
    "s3_plain": "s3_plain",
    "s3_plain_flat": "s3_plain_flat",
    "s3_atomic_create": "s3_plain",
    "s3_atomic_replace_flip": "s3_plain_flat",
    "s3_atomic_overwrite_partitions": "s3_plain",
    "iceberg_plain": "iceberg_plain",
    "iceberg_plain_rtas": "iceberg_plain_rtas",
    "iceberg_create": "iceberg_plain",
    "iceberg_replace": "iceberg_plain_rtas",
    "iceberg_rest_plain": "iceberg_rest_plain",
    "iceberg_rest_plain_rtas": "iceberg_rest_plain_rtas",
    "iceberg_rest_plain_part": "iceberg_rest_plain_part",
    "iceberg_rest_plain_overwrite": "iceberg_rest_plain_overwrite",
    "iceberg_rest_create": "iceberg_rest_plain",
    "iceberg_rest_replace": "iceberg_rest_plain_rtas",
    "iceberg_rest_overwrite_partitions": "iceberg_rest_plain_overwrite",
    "delta_plain": "delta_plain",
    "delta_plain_rtas": "delta_plain_rtas",
    "delta_create": "delta_plain",
    "delta_replace": "delta_plain_rtas",
}
# The plain statement doing the same operation, where that is not a CTAS: rebuilding an existing table.
SAME_OPERATION = {
    "atomic_replace_flip": "plain_overwrite_flat",
    "atomic_overwrite_partitions": "plain_overwrite",
    "connect_replace_flip": "connect_plain_overwrite_flat",
}
# Targets that must exist before the timed runs (replacing an existing version), and the approach seeding them.
REPLACING = {
    "plain_overwrite": ("overwritten", "plain"),
    "plain_overwrite_flat": ("overwritten_flat", "plain_flat"),
    "atomic_replace_flip": ("replaced_flat", "atomic_create_flat"),
    "atomic_replace_swap": ("replaced", "atomic_create"),
    "atomic_overwrite_partitions": ("events", "atomic_overwrite_partitions"),
    "connect_plain_overwrite_flat": ("overwritten_flat", "connect_plain_flat"),
    "connect_replace_flip": ("replaced_flat", "connect_create_flat"),
    "connect_replace_swap": ("replaced", "connect_create"),
    "connect_overwrite_partitions": ("events", "connect_overwrite_partitions"),
    "s3_atomic_replace_flip": ("replaced_flat", "s3_atomic_create_flat"),
    "s3_atomic_overwrite_partitions": ("events", "s3_atomic_overwrite_partitions"),
    "iceberg_plain_rtas": ("ice_rtas", "iceberg_plain"),
    "iceberg_replace": ("ice_replaced", "iceberg_plain"),
    "iceberg_rest_plain_rtas": ("rest_rtas", "iceberg_rest_plain"),
    "iceberg_rest_replace": ("rest_replaced", "iceberg_rest_plain"),
    "iceberg_rest_plain_overwrite": ("rest_overwritten", "iceberg_rest_plain_part"),
    "iceberg_rest_overwrite_partitions": ("rest_partitions", "iceberg_rest_plain_part"),
    "delta_plain_rtas": ("delta_rtas", "delta_plain"),
    "delta_replace": ("delta_replaced", "delta_plain"),
}
FORMAT_SPARK = "4.1.4"
"""The newest Spark that both the Iceberg 1.11 and the Delta 4.4 runtimes support."""
ICEBERG_CATALOG = "ice"
REST_CATALOG = "rest"
"""The formats' world's Iceberg REST catalog (the Iceberg project's own server), for ``iceberg_rest_*``."""
ICEBERG_RUNTIME = "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0"
DELTA_JARS = ("io.delta:delta-spark_4.1_2.13", "io.delta:delta-storage")
S3_DATABASE = "bench_s3"
S3_BUCKET = "bench"
PHASES = ("begin", "prepare", "audit", "commit", "statement")
BACKFILL_SECTION = "\n## Backfill throughput\n"
PHASES_COMPARED_SECTION = "\n## Per phase, before and after\n"
CONNECT_CONN_ID = "spark_connect_bench"
DRIVER_MEMORY = "4g"  # every approach's driver (local[2]: the executors run inside it)
SELECT = """\
SELECT
  id AS order_id,
  id % 100000 AS customer_id,
  CAST((id * 7919) % 1000000 AS DOUBLE) / 100 AS amount,
  CAST((id * 31) % 50 AS INT) AS quantity,
  concat('sku-', CAST(id % 5000 AS STRING)) AS sku,
  concat('order ', CAST(id AS STRING), ' placed via ', element_at(array('web', 'app', 'store'), CAST(id % 3 AS INT) + 1)) AS note,
  element_at(array('DE', 'FR', 'US', 'JP', 'BR', 'IN', 'GB', 'ES'), CAST(id % 8 AS INT) + 1) AS country
FROM range({rows})
"""  # noqa: E501


def environment(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__OPENLINEAGE__DISABLED": "True",
        "SPARK_CONF_DIR": str(root / "spark-conf"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PYTHONPATH": str(REPO),
    }


def start_connect_server(root: Path, env: dict[str, str]) -> Any:
    """A Connect server with its own embedded metastore: Derby admits one JVM, the spark-submit runs use theirs."""
    from ctas_devstack.connect_server import ConnectServer
    from ctas_devstack.metastore import embedded_derby_conf

    world = root / "connect"
    conf = {**embedded_derby_conf(world), "spark.log.level": "WARN", "spark.driver.memory": DRIVER_MEMORY}
    os.environ["SPARK_CONF_DIR"] = str(world / "no-conf")  # nothing from the spark-submit world's conf
    server = ConnectServer(world, conf=conf).start()
    env[f"AIRFLOW_CONN_{CONNECT_CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": server.port}
    )
    return server


def database_of(approach: str) -> str:
    if approach.startswith("iceberg_rest_"):
        return f"{REST_CATALOG}.{DATABASE}"
    if approach.startswith("iceberg_"):
        return f"{ICEBERG_CATALOG}.{DATABASE}"  # the same metastore database, through the Iceberg catalog
    return S3_DATABASE if approach.startswith("s3_") else DATABASE


def in_format_world(approaches: list[str]) -> bool:
    formats = {a.startswith(FORMATS) for a in approaches}
    if len(formats) > 1:
        raise SystemExit("Iceberg/Delta approaches run on another Spark than the others: benchmark them separately")
    return formats == {True}


def start_format_world(root: Path, env: dict[str, str]) -> list[Any]:
    """Spark 4.1.4 (its own pyspark venv: spark-submit, jars, the driver's Python), the Iceberg and
    Delta runtimes from the pinned jar cache, a metastore service that Spark's session catalog
    (Delta's catalog) and the Iceberg catalog share, and an Iceberg REST catalog server. Returns the
    services, to stop."""
    from ctas_devstack.iceberg_rest import IcebergRestCatalog
    from ctas_devstack.metastore import HiveMetastore, write_spark_conf_dir
    from tests.support.spark_versions import pyspark_venv

    venv = pyspark_venv(FORMAT_SPARK)
    python = str(venv / "bin" / "python")
    fetch = [sys.executable, str(REPO / "scripts" / "fetch_jars.py")]
    iceberg = subprocess.run([*fetch, "--path", ICEBERG_RUNTIME], capture_output=True, text=True, check=True)
    delta = subprocess.run([*fetch, "--select", *DELTA_JARS], capture_output=True, text=True, check=True)
    metastore = HiveMetastore(root / "hms").start()
    rest = IcebergRestCatalog(root / "rest").start()
    catalog = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    write_spark_conf_dir(
        root / "spark-conf",
        {
            **metastore.spark_conf(),
            "spark.driver.memory": DRIVER_MEMORY,
            "spark.jars": f"{iceberg.stdout.strip()},{delta.stdout.strip()}",
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            catalog: "org.apache.iceberg.spark.SparkCatalog",
            f"{catalog}.type": "hive",
            f"{catalog}.uri": metastore.uri,
            # pyspark's metastore service has no ACID lock tables (as in the tests)
            "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
            **rest.conf(REST_CATALOG),
        },
    )
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["CTAS_BENCH_PYTHON"] = python  # one_run.py: the drivers' Python is that release's
    return [rest, metastore]


def start_s3_server(root: Path, env: dict[str, str]) -> Any:
    """moto's S3 on 127.0.0.1 (its request log counts copies), the S3A jars on the class path, and
    the bucket for the ``s3_*`` approaches' database."""
    from ctas_devstack.s3 import S3Server, s3_jars

    server = S3Server(root / "s3").start()
    server.client().create_bucket(Bucket=S3_BUCKET)
    env["SPARK_DIST_CLASSPATH"] = os.pathsep.join(s3_jars())
    with (root / "spark-conf" / "spark-defaults.conf").open("a") as conf:
        for key, value in server.hadoop_conf().items():
            conf.write(f"spark.hadoop.{key} {value}\n")
    return server


def warehouse(root: Path, approach: str) -> Path:
    if approach.startswith("iceberg_rest_"):
        return root / "rest" / "warehouse"
    if (root / "hms" / "warehouse").is_dir():  # a metastore service's (the formats' world, --metastore service)
        return root / "hms" / "warehouse"
    return root / "connect" / "warehouse" if approach.startswith("connect_") else root / "warehouse"


def reset_connect_tables(env: dict[str, str], prefix: str) -> None:
    from pyspark.sql import SparkSession

    port = json.loads(env[f"AIRFLOW_CONN_{CONNECT_CONN_ID.upper()}"])["port"]
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    for table in spark.catalog.listTables(DATABASE):
        if table.name.startswith(prefix):
            spark.sql(f"DROP TABLE IF EXISTS {DATABASE}.{table.name} PURGE")
    spark.stop()


def prepare(root: Path, metastore: str = "embedded") -> tuple[dict[str, str], Any]:
    """The harness's world; with ``metastore="service"`` also the metastore service, to stop."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "dags").mkdir(parents=True)
    env = environment(root)
    python = sys.executable
    service = None
    if metastore == "service":
        from ctas_devstack.metastore import HiveMetastore, write_spark_conf_dir

        service = HiveMetastore(root / "hms").start()
        write_spark_conf_dir(root / "spark-conf", service.spark_conf())
    else:
        subprocess.run(
            [python, "-m", "ctas_devstack.metastore", "embedded", "--root", str(root),
             "--spark-conf-dir", str(root / "spark-conf")],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
    subprocess.run([python, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    with (root / "spark-conf" / "spark-defaults.conf").open("a") as conf:
        conf.write(f"spark.driver.memory {DRIVER_MEMORY}\n")  # 1e8 rows OOM the default 1g (measured)
    return env, service


def reset_tables(env: dict[str, str], prefix: str, database: str = DATABASE, location: str = "-") -> None:
    subprocess.run(
        ["spark-submit", "--master", "local[2]", "--conf", "spark.log.level=WARN",
         str(HERE / "apps" / "reset_tables.py"), database, prefix, location],
        env=env, check=True, capture_output=True,
    )  # fmt: skip


def written_bytes(warehouse: Path, since_ns: int) -> int:
    """Bytes of every file under the warehouse modified since the run started (renames keep mtime)."""
    total = 0
    for path in warehouse.rglob("*"):
        if path.is_file():
            stat = path.stat()
            if stat.st_mtime_ns >= since_ns:
                total += stat.st_size
    return total


def run_one(
    root: Path, env: dict[str, str], approach: str, target: str, sql_file: Path, s3: Any = None
) -> dict[str, Any]:
    result_file = root / "result.json"
    requests_before = len(s3.requests()) if s3 is not None else 0
    result_file.unlink(missing_ok=True)
    log = root / "logs" / f"{target.split('.')[-1]}__{approach}.log"
    log.parent.mkdir(exist_ok=True)
    since = time.time_ns() - 1_000_000  # mtimes have coarser clocks than time_ns
    with log.open("w") as handle:
        process = subprocess.run(
            [sys.executable, str(HERE / "one_run.py"), approach, target, str(sql_file), str(result_file)],
            env=env, stdout=handle, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    if not result_file.exists():
        raise RuntimeError(f"{approach} {target}: no result (exit {process.returncode}); see {log}")
    result: dict[str, Any] = json.loads(result_file.read_text())
    if result["state"] != "success":
        raise RuntimeError(f"{approach} {target}: task {result['state']}; see {log}")
    if approach.startswith("s3_"):
        copies = [r for r in s3.requests()[requests_before:] if r.get("copy_source")]
        result["s3_copies"] = len(copies)  # server-side copies: a rename on S3 is made of them
        result["bytes"] = 0  # not read back from the bucket; the local-disk rows show bytes are equal
    else:
        result["bytes"] = written_bytes(warehouse(root, approach), since) + int(result.pop("deleted_bytes", 0))
    result["spark_submits"] = log.read_text().count("Spark-Submit cmd")  # SparkSubmitHook logs each one
    return result


def measure(args: argparse.Namespace) -> dict[str, Any]:
    root = args.root.resolve()
    if args.metastore == "service" and (
        in_format_world(args.approaches) or any(a.startswith(("connect_", "s3_")) for a in args.approaches)
    ):
        raise SystemExit("--metastore service is for the spark-submit approaches on local disk")
    env, service = prepare(root, args.metastore)
    formats = start_format_world(root, env) if in_format_world(args.approaches) else []
    connect = any(a.startswith("connect_") for a in args.approaches)
    s3 = start_s3_server(root, env) if any(a.startswith("s3_") for a in args.approaches) else None
    server = start_connect_server(root, env) if connect else None
    try:
        return measure_sizes(args, root, env, connect, s3)
    finally:
        if server is not None:
            server.stop()
        if s3 is not None:
            s3.stop()
        for started in formats:
            started.stop()
        if service is not None:
            service.stop()


def measure_sizes(
    args: argparse.Namespace, root: Path, env: dict[str, str], connect: bool, s3: Any = None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {memory_gib():.0f} GiB, {platform.platform()}",
        "date": pendulum.now("UTC").to_iso8601_string(),
        "commit": reports.commit("airflow_provider_ctas", "benchmarks", "ctas_devstack"),
        "repeats": args.repeats,
        "metastore": args.metastore,
        "world": (
            f"Spark {FORMAT_SPARK} (spark-submit, local[2]) with {ICEBERG_RUNTIME.split(':', 1)[1]} and Delta "
            "4.4; a Hive metastore service shared by Delta's session catalog and the Iceberg catalog; the "
            "Iceberg project's REST catalog server (its catalog in SQLite, its warehouse on local disk) for "
            "the REST rows"
            if in_format_world(args.approaches)
            else None
        ),
        "runs": [],
    }
    runs: list[dict[str, Any]] = data["runs"]
    for size in args.sizes:
        rows = int(float(size))
        label = size_label(rows)
        sql_file = root / f"select_{label}.sql"
        sql_file.write_text(SELECT.format(rows=rows))
        prefix = f"s{rows}_"
        reset_tables(env, prefix)
        if any(a.startswith("iceberg_rest_") for a in args.approaches):
            reset_tables(env, prefix, f"{REST_CATALOG}.{DATABASE}")  # creates the namespace
        if s3 is not None:
            reset_tables(env, prefix, S3_DATABASE, f"s3a://{S3_BUCKET}/{S3_DATABASE}.db")
        if connect:
            reset_connect_tables(env, prefix)
        # Untimed seeds: replace and overwrite_partitions measure replacing an existing version.
        for approach in args.approaches:
            if approach in REPLACING:
                name, seeder = REPLACING[approach]
                run_one(root, env, seeder, f"{database_of(approach)}.{prefix}{name}", sql_file, s3)
        for repeat in range(args.repeats):
            for approach in args.approaches:
                name = REPLACING[approach][0] if approach in REPLACING else f"{approach}_{repeat}"
                target = f"{database_of(approach)}.{prefix}{name}"
                result = run_one(root, env, approach, target, sql_file, s3)
                result.update(size=rows, approach=approach, repeat=repeat)
                runs.append(result)
                (root / "runs.json").write_text(json.dumps(data))  # render a cut-short run with --from-json
                print(
                    f"{label:>4} {approach:<28} {result['wall_seconds']:7.1f}s  {result['bytes'] / 1e6:9.1f} MB  "
                    f"publish {result.get('publish_seconds') or 0:6.3f}s  rss {result['peak_rss_mb']:6.0f} MB",
                    flush=True,
                )
        # The next run's prepare() removes the whole root: no JVM for the last size. The formats'
        # tables stay (the session catalog cannot drop Iceberg's; each size has its own names).
        if size != args.sizes[-1] and not in_format_world(args.approaches):
            _drop_size(env, prefix, s3, connect)
    return data


def _drop_size(env: dict[str, str], prefix: str, s3: Any, connect: bool) -> None:
    """Free the disk of one size's tables before the next size."""
    reset_tables(env, prefix)
    if s3 is not None:
        reset_tables(env, prefix, S3_DATABASE)
    if connect:
        reset_connect_tables(env, prefix)


def size_label(rows: int) -> str:
    return f"{rows:.0e}".replace("e+0", "e").replace("e+", "e")


def memory_gib() -> float:
    import psutil

    return float(psutil.virtual_memory().total) / 2**30


def summarize(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size in sorted({run["size"] for run in data["runs"]}):
        by_approach = {
            approach: [run for run in data["runs"] if run["size"] == size and run["approach"] == approach]
            for approach in APPROACHES
        }
        for approach, runs in by_approach.items():
            if not runs:
                continue
            base = by_approach.get(BASELINE[approach]) or []
            base_wall = statistics.median(r["wall_seconds"] for r in base) if base else None
            same = by_approach.get(SAME_OPERATION.get(approach, "")) or []
            same_wall = statistics.median(r["wall_seconds"] for r in same) if same else None
            base_bytes = statistics.median(r["bytes"] for r in base) if base else None
            base_rss = statistics.median(r["peak_rss_mb"] for r in base) if base else None
            walls = [r["wall_seconds"] for r in runs]
            wall = statistics.median(walls)
            ratios = paired_ratios(runs, base)
            same_ratios = paired_ratios(runs, same) if same else []
            written = statistics.median(r["bytes"] for r in runs)
            rss = statistics.median(r["peak_rss_mb"] for r in runs)
            publishes = [r["publish_seconds"] for r in runs if r.get("publish_seconds") is not None]
            children = [r["child_peak_rss_mb"] for r in runs if "child_peak_rss_mb" in r]
            phases = {
                phase: statistics.median(values)
                for phase in PHASES
                if (values := [r["phases"][phase] for r in runs if phase in r.get("phases", {})])
            }
            rows.append(
                {
                    "size": size,
                    "approach": approach,
                    "runs": len(runs),
                    "session": runs[0].get("session", data.get("date", "")),
                    "wall": wall,
                    "pairs": len(ratios),
                    "ratio": statistics.median(ratios) if ratios else (wall / base_wall if base_wall else None),
                    "ratio_min": min(ratios) if ratios else (min(walls) / base_wall if base_wall else None),
                    "ratio_max": max(ratios) if ratios else (max(walls) / base_wall if base_wall else None),
                    "overhead": wall - base_wall if base_wall else None,
                    "same_ratio": (
                        statistics.median(same_ratios) if same_ratios else (wall / same_wall if same_wall else None)
                    ),
                    "work": paired_work(runs, base, phases),
                    "same_work": paired_work(runs, same, phases) if same else None,
                    "same_overhead": wall - same_wall if same_wall else None,
                    "bytes": written,
                    "bytes_ratio": written / base_bytes if base_bytes else None,
                    "publish": statistics.median(publishes) if publishes else None,
                    "phases": phases,
                    "rss": rss,
                    "rss_delta": rss - base_rss if base_rss is not None else None,
                    "child_rss": statistics.median(children) if children else None,
                    "spark_submits": max(r["spark_submits"] for r in runs),
                    "mechanism": runs[0].get("publish_mechanism") or "",
                    "s3_copies": (
                        statistics.median(r["s3_copies"] for r in runs) if all("s3_copies" in r for r in runs) else None
                    ),
                }
            )
    return rows


def pairs(
    runs: list[dict[str, Any]], plain: list[dict[str, Any]], value: Callable[[dict[str, Any]], float | None]
) -> list[tuple[dict[str, Any], float]]:
    """Each run with ``value`` of the plain run of the same round (``repeat``) of the same session:
    runs minutes apart at most, so the machine's drift cancels pair by pair. Empty where the runs
    carry no rounds (saved before they did) or the approach is its own baseline."""
    if runs is plain:
        return []
    rounds = {(r.get("session"), r["repeat"]): v for r in plain if "repeat" in r and (v := value(r)) is not None}
    return [(r, rounds[key]) for r in runs if (key := (r.get("session"), r.get("repeat"))) in rounds]


def paired_ratios(runs: list[dict[str, Any]], base: list[dict[str, Any]]) -> list[float]:
    """Each run's wall time over its baseline's run of the same round (``pairs``)."""
    return [run["wall_seconds"] / wall for run, wall in pairs(runs, base, lambda r: r["wall_seconds"])]


def paired_work(runs: list[dict[str, Any]], plain: list[dict[str, Any]], medians: dict[str, float]) -> float | None:
    """The median of each run's atomic work (``atomic_work``) against the plain statement of its
    round (``pairs``): a difference of two medians can pair a slow round of one with a fast round
    of the other, which three rounds do not average out. Without rounds, the phases' ``medians``
    against the plain statement's."""
    if runs is plain or not plain:
        return None
    paired = [
        work
        for run, statement in pairs(runs, plain, lambda r: r.get("phases", {}).get("statement"))
        if (work := atomic_work(run.get("phases", {}), statement)) is not None
    ]
    if paired:
        return statistics.median(paired)
    statements = [r["phases"]["statement"] for r in plain if "statement" in r.get("phases", {})]
    return atomic_work(medians, statistics.median(statements)) if statements else None


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + unit


def atomic_work(phases: dict[str, float], plain_statement: float | None) -> float | None:
    """What the atomic run spends beyond the plain statement's work: begin, audit, commit, and the
    part of prepare the plain statement does not pay."""
    if not {"begin", "prepare", "commit"} <= phases.keys() or plain_statement is None:
        return None
    return phases["begin"] + phases.get("audit", 0.0) + phases["commit"] + phases["prepare"] - plain_statement


def same_operation(row: dict[str, Any]) -> str:
    if row["same_ratio"] is None:
        return "n/a"
    return f"{row['same_ratio']:.3f} ({row['same_overhead']:+.2f} s)"


def report_kind(data: dict[str, Any]) -> reports.Kind:
    """The formats' report for a run of the Iceberg/Delta approaches (another Spark: another world),
    else the benchmark's."""
    return reports.FORMATS if in_format_world([run["approach"] for run in data["runs"]]) else reports.BENCHMARKS


def history_cells(data: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The report's history row: date, commit, sizes and repeats, and per size each approach's median
    wall over its baseline's (approaches that are their own baseline left out)."""
    ratios = []
    for size in sorted({row["size"] for row in rows}):
        measured = [row for row in rows if row["size"] == size and BASELINE[row["approach"]] != row["approach"]]
        if measured:
            ratios.append(
                f"{size_label(size)}: " + ", ".join(f"{r['approach']} {fmt(r['ratio'], '.3f')}" for r in measured)
            )
    service = ", metastore service" if data.get("metastore") == "service" else ""
    return [
        ", ".join(reports.stamp(date) for date in data["dates"]),
        ", ".join(data["commits"]),
        "; ".join(data["measured"]) + service,
        "<br>".join(ratios) or "-",
    ]


def render_report(data: dict[str, Any], rows: list[dict[str, Any]], plot_name: str | None) -> str:
    lines = [
        "# Benchmarks: what atomicity costs",
        "",
        f"Generated by `bash benchmarks/run.sh{' --metastore service' if data.get('metastore') == 'service' else ''}` "
        "(benchmarks/ctas_benchmark.py); do not edit by hand.",
        "",
        *([f"- Machine: {data['machine']}"] if data["machine"] else []),
        *[f"- Run: {run}" for run in data["sessions"]],
        *[f"- Formats: {world}; Airflow on SQLite" for world in data.get("worlds", [])],
        *(
            [
                "- Every run is a one-task DAG run (`dag.test()`) in that world. Each Iceberg or Delta row is",
                "  divided by the plain statement of the same format and query, unpartitioned, sent by",
                "  `SparkSubmitOperator`: `create` by a plain CTAS, `replace` by a plain `CREATE OR REPLACE`",
                "  (each seeded with a table first). The paragraphs below on the parquet rows do not apply.",
            ]
            if data.get("worlds")
            else []
        ),
        *(
            [
                "- Every run is a one-task DAG run (`dag.test()`): local[2] Spark via spark-submit, Airflow",
                "  on SQLite, and a Hive metastore service (pyspark's own jars, Derby behind it) started once",
                "  and kept up, which every driver shares, as a production metastore is. Times are medians of",
                "  the DAG run's",
            ]
            if data.get("metastore") == "service"
            else [
                "- Every run is a one-task DAG run (`dag.test()`) on the embedded default: local[2] Spark via",
                "  spark-submit, embedded Derby metastore, Airflow on SQLite. Times are medians of the DAG run's",
            ]
        ),
        "  wall time. Bytes are read from the warehouse's files (plus staging a run wrote and deleted).",
        "  RSS is the peak of the Airflow task process (the Spark JVM is its child, not counted); the",
        "  largest child is the peak RSS of the biggest process the task started and reaped (the Spark",
        "  JVM of a spark-submit): with the task's own, what the worker hosts.",
        "- Like against like: every row is divided by the plain CTAS of the same query with the same",
        "  shape over the same transport (its baseline: (a) partitioned or (a') unpartitioned over",
        "  spark-submit; (a_c) or (a_c') sent from the task process over the same Spark Connect server,",
        "  which is started once and kept up, as a Connect deployment is). `replace` of a same-shape table",
        "  (the flip, the default) needs an unpartitioned target, so it and (a') are unpartitioned; the",
        "  swap (opt-in, for a shape change) is measured partitioned.",
        "- 'vs baseline' is the median of the per-pair ratios: each run over its baseline's run of the same",
        "  round (A B A B ..., minutes apart at most, so the machine's drift cancels pair by pair), with",
        "  the spread (min-max of the pairs); 'Δ wall' is the difference of the medians, the fixed",
        "  overhead. The driver's phase times below do not depend on the machine's mood as wall times do.",
        "- 'vs the same plain operation': rebuilding an existing table is also set against the plain",
        "  statement a user runs for that, where one was measured: the flip against a plain `INSERT",
        "  OVERWRITE` of an existing unpartitioned table (a_o'; over Spark Connect, a_co'),",
        "  `overwrite_partitions` against a plain dynamic `INSERT OVERWRITE` of an existing table's",
        "  partitions (a_o). Both read the existing table's metadata and delete its old files, which a",
        "  CTAS of a new table does not. Its ratio is paired by round too; its Δ wall, the medians'.",
        "",
        *([f"![ratio and publish time vs size]({plot_name})", ""] if plot_name else []),
        "| rows | approach | runs | median wall | vs baseline (min-max) | Δ wall | vs the same plain operation (Δ wall) | bytes written | vs baseline | publish | peak RSS (task) | Δ RSS | largest child | spark-submits |",  # noqa: E501
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        publish = fmt(row["publish"], ".3f") + " s" if row["publish"] is not None else "n/a"
        if row["mechanism"]:
            publish += f" ({row['mechanism']})"
        child = "not recorded" if row["child_rss"] is None else f"{row['child_rss']:.0f} MB"
        spread = (
            f"{fmt(row['ratio'], '.3f')} ({fmt(row['ratio_min'], '.2f')}-{fmt(row['ratio_max'], '.2f')})"
            if row["ratio"] is not None
            else "n/a"
        )
        lines.append(
            f"| {size_label(row['size'])} | {APPROACHES[row['approach']]} | {row['runs']} | {row['wall']:.1f} s | "
            f"{spread} | {fmt(row['overhead'], '+.2f')} s | {same_operation(row)} | "
            f"{row['bytes'] / 1e6:.1f} MB | {fmt(row['bytes_ratio'], '.4f')} | {publish} | {row['rss']:.0f} MB | "
            f"{fmt(row['rss_delta'], '+.0f')} MB | {child} | {row['spark_submits']} |"
        )
    lines += [
        "",
        "## Where the time goes, phase by phase",
        "",
        "Medians per phase as the driver timed them (XCom `details.phases`): `begin` (catalog checks,",
        "staging table), `prepare` (the query written into staging; the plain CTAS's `statement` is the",
        "same work without the atomicity), `commit` (fence, publish, provenance, clean-up; for a",
        "spark-submit run it includes the task's commit decision). Everything else in the wall time",
        "(JVM and SparkSession start, Airflow's task start and end) is paid by the baseline as well.",
        "",
        "The atomic work (the last two columns) is taken per round, as the ratios are: each run's phases",
        "against the plain statement of its round, and the median of those. The last column sets prepare",
        "against the statement of the same plain operation (above) instead.",
        "",
        "| rows | approach | begin | prepare or statement | audit | commit "
        "| begin + audit + commit + (prepare - baseline statement) | the same, against the same plain operation |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        phases = row["phases"]
        if not phases:
            continue
        work = phases.get("prepare", phases.get("statement"))
        lines.append(
            f"| {size_label(row['size'])} | {APPROACHES[row['approach']]} | {fmt(phases.get('begin'), '.2f')} s | "
            f"{fmt(work, '.2f')} s | {fmt(phases.get('audit'), '.2f', ' s')} | {fmt(phases.get('commit'), '.2f')} s | "
            f"{fmt(row['work'], '+.2f')} s | {fmt(row['same_work'], '+.2f', ' s')} |"
        )
    copies = [row for row in rows if row.get("s3_copies") is not None]
    if copies:
        lines += [
            "",
            "## Object copies on S3",
            "",
            "Server-side copy requests (`x-amz-copy-source`) in the S3 server's request log during each run",
            "(median). Spark's default commit protocol renames task output into the run's directory, so a",
            "plain CTAS makes copies too; an atomic run making no more copies than its baseline shows that",
            "its publish copies nothing (the tests assert zero copies from the publish on).",
            "",
            "| rows | approach | copies during the run |",
            "|---:|---|---:|",
            *[f"| {size_label(r['size'])} | {APPROACHES[r['approach']]} | {r['s3_copies']:.0f} |" for r in copies],
        ]
    lines += ["", "Raw runs (seconds, bytes, MB):", "", "```json", json.dumps(data["runs"], indent=1), "```", ""]
    lines += [reports.marker(report_kind(data), history_cells(data, rows)), ""]
    return "\n".join(lines)


def plot_results(rows: list[dict[str, Any]], plot: Path) -> None:
    """Markers with min-max bars; a line joins only points of one session (one run of the harness)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 6.5))
    for index, (approach, title) in enumerate(APPROACHES.items()):
        mine = [r for r in rows if r["approach"] == approach]
        if not mine or BASELINE[approach] == approach:
            continue
        color = f"C{index % 10}"
        for number, session in enumerate(sorted({r["session"] for r in mine})):
            points = [r for r in mine if r["session"] == session and r["ratio"] is not None]
            if points:
                sizes = [r["size"] for r in points]
                ratios = [r["ratio"] for r in points]
                spread = [[r["ratio"] - r["ratio_min"] for r in points], [r["ratio_max"] - r["ratio"] for r in points]]
                style = {"color": color, "marker": "o", "linestyle": "-" if len(points) > 1 else "none"}
                label = title if number == 0 else None
                left.errorbar(sizes, ratios, yerr=spread, capsize=3, label=label, **style)
            published = [r for r in mine if r["session"] == session and r["publish"] is not None]
            if published:
                style = {"color": color, "marker": "o", "linestyle": "-" if len(published) > 1 else "none"}
                label = title if number == 0 else None
                right.plot([r["size"] for r in published], [r["publish"] for r in published], label=label, **style)
    if not right.lines:  # the Iceberg/Delta strategies time their phases, not a publish step
        right.text(0.5, 0.5, "no publish step timed:\nsee the commit phase in the report", ha="center",
                   transform=right.transAxes)  # fmt: skip
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_xlabel("rows")
        axis.grid(True, alpha=0.3)
        if axis.lines:
            axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    left.axhline(1.0, color="grey", linewidth=1)
    left.set_ylabel("median wall time / its plain baseline (bars: min-max)")
    left.set_title("Cost relative to a plain CTAS of the same shape and transport")
    right.set_yscale("log")  # (c)'s copy grows to minutes; (b)'s sub-second steps must stay readable
    right.set_ylabel("publish step (s, log scale)")
    right.set_title("Publish time vs data size")
    figure.tight_layout()
    figure.savefig(plot, dpi=110, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["1e6", "1e7", "1e8"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--approaches", nargs="+", choices=list(APPROACHES), default=list(APPROACHES))
    parser.add_argument(
        "--metastore",
        choices=["embedded", "service"],
        default="embedded",
        help="Spark's embedded Derby metastore (the default world), or a metastore service every driver shares",
    )
    parser.add_argument("--root", type=Path, default=REPO / ".ctas-local" / "bench")
    parser.add_argument(
        "--out", type=Path, help="default: build/reports/benchmarks.md (formats.md for the Iceberg/Delta approaches)"
    )
    parser.add_argument("--plot", type=Path, help="default: beside --out, named as it with .png")
    parser.add_argument("--no-plot", action="store_true", help="skip the plot (no matplotlib needed): CI's smoke run")
    parser.add_argument("--from-json", type=Path, nargs="+", help="re-render the report from saved runs (merged)")
    args = parser.parse_args(argv)
    # Spark's settings are this harness's own (its spark-defaults.conf): none from SPARK_SUBMIT_OPTS.
    os.environ.pop("SPARK_SUBMIT_OPTS", None)
    saved = [json.loads(path.read_text()) for path in args.from_json] if args.from_json else [measure(args)]
    data = merge(saved)
    rows = summarize(data)
    out = args.out or report_kind(data).report
    plot = args.plot or out.with_suffix(".png")
    kept = other_sections(reports.current(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(data, rows, None if args.no_plot else plot.name) + kept)
    if not args.no_plot:
        plot_results(rows, plot)
    print(f"wrote {out}" + ("" if args.no_plot else f" and {plot}"))
    return 0


def other_sections(report: str) -> str:
    """The sections other scripts added to a report (phases_compared.py, backfill_throughput.py),
    which a re-run of this one keeps."""
    starts = [report.index(section) for section in (PHASES_COMPARED_SECTION, BACKFILL_SECTION) if section in report]
    return report[min(starts) :] if starts else ""


def merge(saved: list[dict[str, Any]]) -> dict[str, Any]:
    """Sessions may differ in machine speed, so a ratio must never compare runs of two sessions: an
    approach at a size comes from one session, and its baseline from the same one."""
    session_of: dict[tuple[int, str], str] = {}
    for d in saved:
        for key in {(r["size"], r["approach"]) for r in d["runs"]}:
            if key in session_of:
                raise SystemExit(
                    f"{key[1]} at {size_label(key[0])} is in two saved runs ({session_of[key]}, {d['date']})"
                )
            session_of[key] = d["date"]
    for (size, approach), date in session_of.items():
        baseline = session_of.get((size, BASELINE[approach]))
        if baseline is not None and baseline != date:
            raise SystemExit(f"{approach} at {size_label(size)} and its baseline are from two saved runs")
    one_machine = len({d["machine"] for d in saved}) == 1
    metastores = {d.get("metastore", "embedded") for d in saved}
    if len(metastores) > 1:
        raise SystemExit("saved runs on the embedded metastore and on a metastore service are separate reports")
    return {
        "machine": saved[0]["machine"] if one_machine else None,
        "metastore": metastores.pop(),
        "dates": [d["date"] for d in saved],
        "commits": sorted({d.get("commit") or "unknown" for d in saved}),
        "measured": [
            f"{', '.join(sorted({size_label(r['size']) for r in d['runs']}, key=float))} ({d['repeats']} repeats)"
            for d in saved
        ],
        "worlds": sorted({d["world"] for d in saved if d.get("world")}),
        "sessions": [
            f"{d['date']}{'' if one_machine else ' on ' + d['machine']}, "
            f"sizes {', '.join(sorted({size_label(r['size']) for r in d['runs']}))}: "
            f"{d['repeats']} repeat(s) per approach and size, interleaved"
            for d in saved
        ],
        "runs": [{"session": d["date"], **run} for d in saved for run in d["runs"]],
    }


if __name__ == "__main__":
    sys.exit(main())
