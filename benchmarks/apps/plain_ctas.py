"""Baseline (a): the CTAS a user runs today with ``SparkSubmitOperator``; not atomic.

spark-submit plain_ctas.py <target> <partition column, or - for none> <file with the SELECT> <result json>
             [<format, default parquet> <create | replace | overwrite>]

``overwrite`` is the plain way to rebuild an existing table of the same shape: ``INSERT OVERWRITE``
(dynamic: of a partitioned table, the partitions the query produces), which deletes the old files
before it writes the new ones. The result file records the statement's own time, to set against the
atomic run's phases.
"""

import json
import sys
import time

from pyspark.sql import SparkSession

target, partition_column, sql_file, result_file = sys.argv[1:5]
table_format = sys.argv[5] if len(sys.argv) > 5 else "parquet"
verb = sys.argv[6] if len(sys.argv) > 6 else "create"
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
with open(sql_file) as handle:
    select = handle.read()
partitioned = f" PARTITIONED BY ({partition_column})" if partition_column != "-" else ""
started = time.monotonic()
if verb == "overwrite":
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    spark.sql(f"INSERT OVERWRITE TABLE {target} {select}")
else:
    create = "CREATE OR REPLACE TABLE" if verb == "replace" else "CREATE TABLE"
    spark.sql(f"{create} {target} USING {table_format}{partitioned} AS {select}")
with open(result_file, "w") as handle:
    json.dump({"statement_seconds": time.monotonic() - started}, handle)
spark.stop()
