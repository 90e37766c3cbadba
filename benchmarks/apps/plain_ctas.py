"""Baseline (a): the CTAS a user runs today with ``SparkSubmitOperator``; not atomic.

spark-submit plain_ctas.py <target> <partition column> <file with the SELECT>
"""

import sys

from pyspark.sql import SparkSession

target, partition_column, sql_file = sys.argv[1:4]
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
with open(sql_file) as handle:
    select = handle.read()
spark.sql(f"CREATE TABLE {target} USING parquet PARTITIONED BY ({partition_column}) AS {select}")
spark.stop()
