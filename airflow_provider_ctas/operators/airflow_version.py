"""The Airflow versions the operators run on, checked when they are imported (as Airflow's own
providers do): installed with ``--no-deps`` next to an older Airflow, the provider says so instead of
failing later on a missing task-SDK or asset interface."""

from __future__ import annotations

from packaging.version import Version

from airflow_provider_ctas import __version__

MINIMUM_AIRFLOW = Version("3.3.2")
"""The oldest Airflow CI ran the provider on; the wheel requires it too (pyproject.toml)."""


def require_airflow(installed: str) -> None:
    if Version(Version(installed).base_version) < MINIMUM_AIRFLOW:
        raise RuntimeError(
            f"airflow-provider-ctas {__version__} needs Apache Airflow {MINIMUM_AIRFLOW}+ (partitioned "
            f"asset events, the task SDK's retry policies); this is Airflow {installed}"
        )
