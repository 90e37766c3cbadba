"""Create the benchmark database if missing and drop its tables with a prefix, so the disk holds
one size at a time.

    spark-submit reset_tables.py <database> <table name prefix> [<database location> | -]
"""

import sys

from pyspark.sql import SparkSession

database, prefix = sys.argv[1:3]
location = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}" + (f" LOCATION '{location}'" if location else ""))
for table in spark.catalog.listTables(database):
    if table.name.startswith(prefix):
        spark.sql(f"DROP TABLE IF EXISTS {database}.{table.name} PURGE")
spark.stop()
