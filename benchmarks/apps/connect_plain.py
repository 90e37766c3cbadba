"""Baseline (a) over Spark Connect: the same plain CTAS (or, for an existing table, INSERT OVERWRITE)
sent over the same Connect server, from the task process, as a user's ``@task`` would; not atomic."""

import json
import time

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from pyspark.sql import SparkSession


def run(
    conn_id: str, target: str, partition_column: str, sql_file: str, result_file: str, verb: str = "create"
) -> None:
    spark = SparkSession.builder.remote(SparkConnectHook(conn_id=conn_id).get_connection_url()).create()
    with open(sql_file) as handle:
        select = handle.read()
    partitioned = f" PARTITIONED BY ({partition_column})" if partition_column != "-" else ""
    started = time.monotonic()
    if verb == "overwrite":  # an existing table's rows replaced, as a user rebuilds it without this provider
        spark.sql(f"INSERT OVERWRITE TABLE {target} {select}")
    else:
        spark.sql(f"CREATE TABLE {target} USING parquet{partitioned} AS {select}")
    with open(result_file, "w") as handle:
        json.dump({"statement_seconds": time.monotonic() - started}, handle)
    spark.stop()
