"""Which Delta settings the Delta strategy refuses, and the fix it names (pure logic; the runtime
check runs in a real session in tests/integration/test_delta.py)."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.catalogs.delta.session import EXTENSION_CLASS, delta_conf_problem
from airflow_provider_ctas.catalogs.delta.strategy import DELTA_CATALOG_CLASS

FIX = f"set spark.sql.catalog.spark_catalog={DELTA_CATALOG_CLASS} and spark.sql.extensions={EXTENSION_CLASS}"


@pytest.mark.parametrize(
    ("catalog", "extensions", "problem"),
    [
        (None, EXTENSION_CLASS, "Spark's session catalog is the built-in one, not Delta's"),
        ("org.example.Catalog", EXTENSION_CLASS, "Spark's session catalog is org.example.Catalog, not Delta's"),
        (DELTA_CATALOG_CLASS, None, "Delta's SQL extension is not enabled"),
        (DELTA_CATALOG_CLASS, f"{EXTENSION_CLASS}Other", "Delta's SQL extension is not enabled"),
    ],
)
def test_a_session_without_delta_catalog_and_extension_is_refused_with_the_fix(catalog, extensions, problem):
    message = delta_conf_problem(catalog, extensions)
    assert message is not None and message.startswith(problem) and FIX in message


@pytest.mark.parametrize("extensions", [EXTENSION_CLASS, f"org.example.Ext,{EXTENSION_CLASS}"])
def test_delta_catalog_with_its_extension_passes(extensions):
    assert delta_conf_problem(DELTA_CATALOG_CLASS, extensions) is None


def test_over_spark_connect_the_fix_is_the_server_s_configuration():
    """A Connect client cannot set static settings on a running server: the message says where."""
    message = delta_conf_problem(None, None, "the Spark Connect server's configuration")
    assert message is not None and message.endswith("in the Spark Connect server's configuration")
    assert "the operator's conf" in (delta_conf_problem(None, None) or "")
