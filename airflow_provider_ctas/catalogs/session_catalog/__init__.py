"""Strategy for tables in Spark's session catalog (Hive metastore) stored in file formats."""
