"""Print a table's first rows, row count and provenance properties (uses SPARK_CONF_DIR)."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main(table: str) -> None:
    spark = SparkSession.builder.master("local[1]").appName("show-table").enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.table(table)
    print(f"\n{table}:")
    frame.orderBy(*frame.columns[:1]).show(5, truncate=False)
    print(f"{table} has {frame.count()} rows")
    for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect():
        if row["key"].startswith("airflow_ctas.") or row["key"] == "team":
            print(f"  {row['key']} = {row['value']}")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
