"""What the registry answers for the parts that are not one strategy's: GC passes."""

from __future__ import annotations

from airflow_provider_ctas.catalogs import STRATEGIES, gc_strategy


def test_gc_passes_come_from_the_registry():
    """``airflow-ctas-gc`` without ``--catalog`` collects in the session catalog's databases (Delta's
    bare staging directories included, read by Delta's own reader); with one, in a named catalog."""
    assert gc_strategy(None).kind == "spark_session_catalog"
    assert gc_strategy("lake").kind == "iceberg"
    assert [s.staging_reader.name for s in STRATEGIES if s.staging_reader] == ["Delta"]
