"""Create the benchmark database if missing and drop its tables with a prefix, so the disk holds
one size at a time.

    spark-submit reset_tables.py <database> <table name prefix>
"""

import sys

from pyspark.sql import SparkSession

database, prefix = sys.argv[1:3]
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
for table in spark.catalog.listTables(database):
    if table.name.startswith(prefix):
        spark.sql(f"DROP TABLE IF EXISTS {database}.{table.name} PURGE")
spark.stop()
