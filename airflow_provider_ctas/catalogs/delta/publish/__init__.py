"""One module per way a Delta try publishes: ``rename`` (a new table), ``in_place`` (an existing one)."""
