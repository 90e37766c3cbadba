"""Baseline for backfills: the plain ``INSERT OVERWRITE ... PARTITION`` a user runs today with
``SparkSubmitOperator``; not atomic (the partition's old files are deleted before the new ones are
written).

    spark-submit insert_overwrite.py <table> <ds> <SELECT producing id, customer_id, amount, ds>
"""

import sys

from pyspark.sql import SparkSession

table, ds, select = sys.argv[1:4]
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
spark.sql(
    f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, customer_id BIGINT, amount DOUBLE, ds STRING) "
    "USING parquet PARTITIONED BY (ds)"
)
spark.sql(f"INSERT OVERWRITE TABLE {table} PARTITION (ds = '{ds}') SELECT id, customer_id, amount FROM ({select}) AS q")
spark.stop()
