"""One measured run: a one-task DAG run with ``dag.test()`` in this process, as the task process.

    python benchmarks/one_run.py <approach> <target> <sql file> <result json>

``dag.test()`` runs the task in this very process, so this process's peak RSS is the Airflow task
process's; RUSAGE_CHILDREN's peak is that of the largest process it reaped (a spark-submit's JVM:
spark-submit execs java). ctas_benchmark.py counts spark-submits in the hook's log lines.
Environment (AIRFLOW_HOME, SPARK_CONF_DIR, the spark connection) comes from ctas_benchmark.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

APPS = Path(__file__).resolve().parent / "apps"
CONF = {"spark.log.level": "WARN", "spark.ui.showConsoleProgress": "false"}
CONNECT_CONN_ID = "spark_connect_bench"
# A typical audit (issue 20): the row count and not-nulls, and a distinct count for the key (a scan after the write).
CHECKS = [
    {"type": "row_count", "min": 1},
    {"type": "not_null", "columns": ["order_id", "customer_id"]},
    {"type": "unique", "columns": ["order_id"]},
]
# Only what the write itself measures (observed metrics on the write): no scan after it.
CHECKS_IN_WRITE = [
    {"type": "row_count", "min": 1},
    {"type": "not_null", "columns": ["order_id", "customer_id"]},
    {"type": "accepted_values", "column": "country", "values": ["DE", "FR", "US", "JP", "BR", "IN", "GB", "ES"]},
    {"type": "value_range", "column": "quantity", "min": 0, "max": 49},
]
CHECKS_OF = {"atomic_create_checks": CHECKS, "atomic_create_checks_in_write": CHECKS_IN_WRITE}
DAG = """\
import json
import pendulum
from airflow.sdk import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow_provider_ctas.operators import AtomicCtasOperator

with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False) as dag:
    {operator}
"""


FORMATS = ("iceberg", "delta")


def partition_column(approach: str) -> str:
    """The flip needs an unpartitioned target, so it and its baselines run unpartitioned ("-")."""
    return "-" if approach.endswith(("_flat", "_flip")) else "country"


def format_operator_source(approach: str, target: str, sql_file: str, result_file: str, conf: dict[str, str]) -> str:
    """Iceberg/Delta (``iceberg_rest_*``: on the REST catalog), unpartitioned but for partition
    overwrites: a plain CTAS, CREATE OR REPLACE or INSERT OVERWRITE through SparkSubmitOperator, or
    the atomic operator."""
    table_format, kind = approach.split("_", 1)
    kind = kind.removeprefix("rest_")
    column = "country" if kind in ("plain_part", "plain_overwrite", "overwrite_partitions") else "-"
    if kind.startswith("plain"):
        verb = {"plain_rtas": "replace", "plain_overwrite": "overwrite"}.get(kind, "create")
        args = [target, column, sql_file, result_file, table_format, verb]
        return f"SparkSubmitOperator(task_id='ctas', application={str(APPS / 'plain_ctas.py')!r}, application_args={args!r}, conf={conf!r})"  # noqa: E501
    sql = Path(sql_file).read_text()
    return (
        f"AtomicCtasOperator(task_id='ctas', target_table={target!r}, sql={sql!r}, mode={kind!r}, "
        f"table_format={table_format!r}, partition_by={[] if column == '-' else [column]!r}, conf={conf!r})"
    )


def operator_source(approach: str, target: str, sql_file: str, result_file: str) -> str:
    approach = approach.removeprefix("s3_")  # the same operators; the target's database is on S3
    python = os.environ.get("CTAS_BENCH_PYTHON", sys.executable)  # the Spark release's own, if another
    conf = {**CONF, "spark.pyspark.python": python, "spark.pyspark.driver.python": python}
    if approach.startswith(FORMATS):
        return format_operator_source(approach, target, sql_file, result_file, conf)
    column = partition_column(approach)
    if approach in ("plain", "plain_flat", "plain_overwrite", "plain_overwrite_flat"):
        verb = ["parquet", "overwrite"] if approach.startswith("plain_overwrite") else []
        args = [target, column, sql_file, result_file, *verb]
        return f"SparkSubmitOperator(task_id='ctas', application={str(APPS / 'plain_ctas.py')!r}, application_args={args!r}, conf={conf!r})"  # noqa: E501
    if approach in ("connect_plain", "connect_plain_flat", "connect_plain_overwrite_flat"):
        verb = ["overwrite"] if approach == "connect_plain_overwrite_flat" else []
        args = [CONNECT_CONN_ID, target, column, sql_file, result_file, *verb]
        return (
            f"__import__('sys').path.insert(0, {str(APPS)!r})\n"
            f"    PythonOperator(task_id='ctas', python_callable=__import__('connect_plain').run, op_args={args!r})"
        )
    if approach == "staging_copy":
        args = [target, column, sql_file, result_file]
        return f"SparkSubmitOperator(task_id='ctas', application={str(APPS / 'staging_copy.py')!r}, application_args={args!r}, conf={conf!r})"  # noqa: E501
    mode = approach.removeprefix("atomic_").removeprefix("connect_")
    sql = Path(sql_file).read_text()
    connection = CONNECT_CONN_ID if approach.startswith("connect_") else "spark_default"
    return (
        f"AtomicCtasOperator(task_id='ctas', target_table={target!r}, sql={sql!r}, "
        f"mode={mode.split('_')[0] if mode.startswith(('create', 'replace')) else mode!r}, "
        f"partition_by={[] if column == '-' else [column]!r}, allow_swap={mode == 'replace_swap'}, "
        f"conn_id={connection!r}{f', checks={CHECKS_OF[approach]!r}' if approach in CHECKS_OF else ''})"
    )


def main() -> int:
    approach, target, sql_file, result_file = sys.argv[1:5]
    dag_id = f"bench_{approach}"
    path = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], f"{dag_id}.py")
    path.write_text(DAG.format(dag_id=dag_id, operator=operator_source(approach, target, sql_file, result_file)))
    spec = importlib.util.spec_from_file_location(dag_id, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    started = time.monotonic()
    dag_run = module.dag.test()
    wall = time.monotonic() - started
    ti = next(t for t in dag_run.get_task_instances() if t.task_id == "ctas")
    result: dict[str, Any] = {
        "state": str(ti.state),
        "wall_seconds": wall,
        "task_seconds": (ti.end_date - ti.start_date).total_seconds(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "child_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }
    if approach.removeprefix("s3_").startswith(("atomic_", "connect_", *FORMATS)) and "plain" not in approach:
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        from airflow_provider_ctas.operators import XCOM_KEY

        with create_session() as session:
            row = session.scalars(XComModel.get_many(run_id=dag_run.run_id, key=XCOM_KEY, dag_ids=dag_id)).first()
            txn = XComModel.deserialize_value(row) if row is not None else {}
        details = txn.get("details", {})
        publish = details.get("publish", {})
        result["publish_seconds"] = publish.get("seconds")
        result["publish_mechanism"] = publish.get("mechanism")
        result["phases"] = {report["phase"]: report["seconds"] for report in details.get("phases", [])}
    elif approach == "staging_copy" and Path(result_file).exists():
        copied = json.loads(Path(result_file).read_text())
        result["publish_seconds"] = copied["copy_seconds"]
        result["deleted_bytes"] = copied["staging_bytes"]
    elif Path(result_file).exists():  # a plain CTAS: its statement's own time
        result["phases"] = {"statement": json.loads(Path(result_file).read_text())["statement_seconds"]}
    Path(result_file).write_text(json.dumps(result))
    return 0 if result["state"] == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
