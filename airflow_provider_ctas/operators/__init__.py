"""Airflow operators of airflow-provider-ctas."""

from airflow_provider_ctas.operators import exceptions
from airflow_provider_ctas.operators.atomic_ctas import AtomicCtasOperator
from airflow_provider_ctas.operators.gc import AtomicCtasGcOperator
from airflow_provider_ctas.operators.state import XCOM_KEY

__all__ = ["XCOM_KEY", "AtomicCtasGcOperator", "AtomicCtasOperator", "exceptions"]
