"""The Iceberg strategy: Iceberg tables in a Spark ``SparkCatalog`` (Hive-metastore-backed),
published by one compare-and-swap of the table's metadata."""
