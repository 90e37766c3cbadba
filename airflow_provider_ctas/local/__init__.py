"""Helpers to run a realistic local stack (metastore service, Spark conf) for trying and testing the provider."""
