"""Airflow operators of airflow-provider-ctas.

The Airflow version is checked before anything else is imported: on an older Airflow those imports
would fail first, with an ImportError that does not say why.
"""

# ruff: noqa: E402

from airflow import __version__ as _airflow_version

from airflow_provider_ctas.operators.airflow_version import require_airflow

require_airflow(_airflow_version)

from airflow_provider_ctas.operators import exceptions
from airflow_provider_ctas.operators.atomic_ctas import AtomicCtasOperator
from airflow_provider_ctas.operators.gc import AtomicCtasGcOperator
from airflow_provider_ctas.operators.publish_group import PublishGroupOperator
from airflow_provider_ctas.operators.state import XCOM_KEY

__all__ = ["XCOM_KEY", "AtomicCtasGcOperator", "AtomicCtasOperator", "PublishGroupOperator", "exceptions"]
