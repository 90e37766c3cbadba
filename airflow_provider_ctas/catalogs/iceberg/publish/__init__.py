"""One module per way an Iceberg try publishes: ``rename`` (a new table), ``branch`` (an existing one)."""
