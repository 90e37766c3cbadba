"""Airflow itself sees the provider (its entry point, through the CLI)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_airflow_lists_the_provider(airflow_db):
    import subprocess
    import sys

    listed = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "get", "airflow-provider-ctas"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "airflow-provider-ctas" in listed.stdout and "0.1.0" in listed.stdout
