"""Airflow operators of airflow-provider-ctas."""

from airflow_provider_ctas.operators.atomic_ctas import XCOM_KEY, AtomicCtasOperator
from airflow_provider_ctas.operators.gc import AtomicCtasGcOperator

__all__ = ["XCOM_KEY", "AtomicCtasGcOperator", "AtomicCtasOperator"]
