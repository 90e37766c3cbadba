"""Strategy for Delta tables in Spark's session catalog (Delta's ``DeltaCatalog``)."""
