"""Audit checks for ``AtomicCtasOperator(checks=[...])``: evaluated on the staged version, before
the publish; a failed check publishes nothing (see ``core.checks``)."""

from airflow_provider_ctas.core.checks import (
    AcceptedValues,
    Check,
    NotNull,
    RowCount,
    RowCountChange,
    SqlCheck,
    Unique,
    ValueRange,
)

__all__ = ["AcceptedValues", "Check", "NotNull", "RowCount", "RowCountChange", "SqlCheck", "Unique", "ValueRange"]
