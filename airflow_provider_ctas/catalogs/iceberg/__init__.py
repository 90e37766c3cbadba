"""The Iceberg strategy: Iceberg tables in a Spark ``SparkCatalog`` (on a Hive metastore, a REST or
a JDBC catalog), published by one commit of the table's metadata."""
