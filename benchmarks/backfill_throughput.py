"""Backfill throughput on the realistic stack: atomic ``overwrite_partitions`` vs a plain ``INSERT
OVERWRITE ... PARTITION`` through the apache-spark provider's ``SparkSubmitOperator``.

    bash benchmarks/run.sh --backfill                     # 30 dates each: a section of build/reports/benchmarks.md
    bash benchmarks/run.sh --backfill --days 6 --rows 1e4 --out /tmp/backfill.md   # a quick look
    bash benchmarks/run.sh --backfill --days 16 --concurrency 8   # 8 tasks at once against one metastore

Airflow's scheduler with LocalExecutor on PostgreSQL, a Spark standalone cluster (client mode) and a
Hive metastore service, all started here. Each DAG backfills the same dates with
``max_active_runs`` set to ``--concurrency`` (default 4), one after the other, into a table that
does not exist yet (so the first runs race to create it, as a real first backfill does). Total
wall is from the first task's start to the last task's end as Airflow recorded them; failed tasks
and retries are counted from Airflow's task instances.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pendulum

from ctas_devstack import reports

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
DAG_SOURCE = """\
import datetime
import pendulum
from airflow.sdk import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow_provider_ctas.operators import AtomicCtasOperator

SQL = (
    "SELECT id, id % 97 AS customer_id, CAST(id % 1000 AS DOUBLE) / 10 AS amount, '{{{{ ds }}}}' AS ds "
    "FROM range({rows})"
)
CONF = {{"spark.cores.max": "1", "spark.executor.memory": "512m"}}
ARGS = dict(
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2024, 1, 1, tz="UTC").add(days={days} - 1),
    catchup=False,
    max_active_runs={concurrency},
    default_args={{"retries": 1, "retry_delay": datetime.timedelta(seconds=2)}},
)

with DAG("throughput_atomic", **ARGS):
    AtomicCtasOperator(
        task_id="load", target_table="{db}.atomic_events", mode="overwrite_partitions", partition_by=["ds"],
        sql=SQL, conn_id="spark_cluster", conf=CONF,
    )

with DAG("throughput_plain", **ARGS):
    SparkSubmitOperator(
        task_id="load", conn_id="spark_cluster", conf=CONF, application={app!r},
        application_args=["{db}.plain_events", "{{{{ ds }}}}", SQL],
    )
"""


def stack(root: Path, concurrency: int) -> tuple[Any, Any, Any, str]:
    from ctas_devstack.airflow_services import AirflowServices
    from ctas_devstack.cluster import StandaloneCluster
    from ctas_devstack.metastore import HiveMetastore, write_spark_conf_dir
    from ctas_devstack.postgres import create_database

    metastore = HiveMetastore(root / "hms").start()
    conf = {**metastore.spark_conf(), "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}
    os.environ["SPARK_CONF_DIR"] = str(write_spark_conf_dir(root / "spark-conf", conf))
    cluster = StandaloneCluster(root / "cluster", cores=max(8, concurrency), memory="6g").start()
    database = f"ctas_bench_{uuid.uuid4().hex[:8]}"
    dags = root / "dags"
    dags.mkdir()
    services = AirflowServices(
        root / "airflow",
        create_database(database),
        dags,
        {
            "AIRFLOW_CONN_SPARK_CLUSTER": json.dumps({"conn_type": "spark", "host": cluster.master_url}),
            "AIRFLOW__CORE__PARALLELISM": str(max(8, concurrency)),
        },
    ).start()
    return metastore, cluster, services, database


def task_instances(services: Any, dag_id: str) -> list[tuple[str, str, int, Any, Any]]:
    import psycopg2

    url = services.sql_alchemy_conn.replace("postgresql+psycopg2://", "postgresql://")
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT run_id, state, try_number, start_date, end_date FROM task_instance WHERE dag_id = %s", (dag_id,)
        )
        return list(cursor.fetchall())


def backfill(services: Any, dag_id: str, days: int, concurrency: int, timeout: float) -> dict[str, Any]:
    services.airflow("dags", "unpause", dag_id)
    end = pendulum.datetime(2024, 1, 1, tz="UTC").add(days=days - 1)
    services.airflow(
        "backfill", "create", "--dag-id", dag_id, "--from-date", "2024-01-01",
        "--to-date", end.to_date_string(), "--max-active-runs", str(concurrency),
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        tis = task_instances(services, dag_id)
        if len(tis) >= days and all(state in ("success", "failed") for _, state, *_ in tis):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{dag_id}: not finished after {timeout}s: {tis}")
        time.sleep(2)
    starts = [start for *_, start, _ in tis if start is not None]
    ends = [end for *_, end in tis if end is not None]
    return {
        "dag_id": dag_id,
        "tasks": len(tis),
        "failed": sorted(run for run, state, *_ in tis if state != "success"),
        "retried": sorted(run for run, _, tries, *_ in tis if tries > 1),
        "wall_seconds": (max(ends) - min(starts)).total_seconds(),
    }


SECTION = "\n## Backfill throughput\n"


def render(result: dict[str, Any]) -> str:
    atomic, plain = result["atomic"], result["plain"]
    ratio = atomic["wall_seconds"] / plain["wall_seconds"]
    return SECTION + "\n".join(
        [
            "",
            f"Generated by `bash benchmarks/run.sh --backfill` (benchmarks/backfill_throughput.py) on "
            f"{result['date']}, {result['machine']}: {result['days']} dates of {result['rows']} rows each, "
            f"`max_active_runs={result.get('concurrency', 4)}`, Airflow's scheduler with LocalExecutor on "
            "PostgreSQL, a Spark standalone "
            "cluster (client mode, one core per application), a Hive metastore service; the table does not "
            "exist before the first run. Wall is first task start to last task end as Airflow recorded them.",
            "",
            "| backfill | tasks | total wall | vs plain | failed tasks | tasks that needed a retry |",
            "|---|---:|---:|---:|---:|---:|",
            f"| plain `INSERT OVERWRITE ... PARTITION` (SparkSubmitOperator) | {plain['tasks']} | "
            f"{plain['wall_seconds']:.0f} s | 1.000 | {len(plain['failed'])} | {len(plain['retried'])} |",
            f"| AtomicCtasOperator, mode=overwrite_partitions | {atomic['tasks']} | {atomic['wall_seconds']:.0f} s | "
            f"{ratio:.3f} | {len(atomic['failed'])} | {len(atomic['retried'])} |",
            "",
            f"Runs that needed a retry: atomic {atomic['retried'] or 'none'}; plain {plain['retried'] or 'none'}.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rows", default="1e5", help="rows per date")
    parser.add_argument("--concurrency", type=int, default=4, help="task instances at once (max_active_runs)")
    parser.add_argument("--root", type=Path, default=REPO / ".ctas-local" / "bench-backfill")
    parser.add_argument("--out", type=Path, default=reports.BENCHMARKS.report, help="its section replaced or added")
    args = parser.parse_args(argv)
    from ctas_devstack.postgres import drop_database

    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    metastore, cluster, services, database = stack(args.root.resolve(), args.concurrency)
    try:
        subprocess.run(
            ["spark-submit", "--master", "local[1]", str(HERE / "apps" / "reset_tables.py"), "bench", "none_"],
            check=True, capture_output=True,
        )  # fmt: skip
        app = str(HERE / "apps" / "insert_overwrite.py")
        source = DAG_SOURCE.format(
            db="bench", rows=int(float(args.rows)), app=app, days=args.days, concurrency=args.concurrency
        )
        (services.dags_folder / "throughput.py").write_text(source)
        services.reserialize()
        timeout = 120 * args.days + 600
        plain = backfill(services, "throughput_plain", args.days, args.concurrency, timeout)
        print(json.dumps(plain), flush=True)
        atomic = backfill(services, "throughput_atomic", args.days, args.concurrency, timeout)
        print(json.dumps(atomic), flush=True)
    finally:
        services.stop()
        cluster.stop()
        metastore.stop()
        drop_database(database)
    result = {
        "date": pendulum.now("UTC").to_iso8601_string(),
        "machine": f"{os.uname().nodename}: {os.cpu_count()} cores",
        "days": args.days,
        "rows": int(float(args.rows)),
        "concurrency": args.concurrency,
        "plain": plain,
        "atomic": atomic,
    }
    (args.root / "result.json").write_text(json.dumps(result))
    existing = reports.current(args.out)  # the published report's body if there is none under build/ yet
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(existing.split(SECTION, 1)[0].rstrip("\n") + "\n" + render(result))
    print(render(result))
    return 0 if not atomic["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
