"""Baseline (c): the "write a staging table, then copy it into the target" approach of dbt-style
tools. Atomic-ish: the target changes in one statement, but every byte is written twice.

    spark-submit staging_copy.py <target> <partition column> <file with the SELECT> <result json>

The result file records the staging table's bytes (read from the filesystem before it is dropped)
and how long the copy step took, which is this approach's "publish".
"""

import json
import sys
import time

from pyspark.sql import SparkSession

target, partition_column, sql_file, result_file = sys.argv[1:5]
staging = f"{target}__dbt_tmp"
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
with open(sql_file) as handle:
    select = handle.read()
spark.sql(f"DROP TABLE IF EXISTS {staging}")
spark.sql(f"CREATE TABLE {staging} USING parquet PARTITIONED BY ({partition_column}) AS {select}")
location = spark.sql(f"DESCRIBE TABLE EXTENDED {staging}").where("col_name = 'Location'").first()["data_type"]
jvm = spark.sparkContext._jvm
path = jvm.org.apache.hadoop.fs.Path(location)
staging_bytes = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).getContentSummary(path).getLength()
started = time.monotonic()
if spark.catalog.tableExists(target):
    spark.sql(f"INSERT OVERWRITE TABLE {target} SELECT * FROM {staging}")
else:
    spark.sql(f"CREATE TABLE {target} USING parquet PARTITIONED BY ({partition_column}) AS SELECT * FROM {staging}")
copy_seconds = time.monotonic() - started
spark.sql(f"DROP TABLE {staging}")
with open(result_file, "w") as handle:
    json.dump({"staging_bytes": staging_bytes, "copy_seconds": copy_seconds}, handle)
spark.stop()
