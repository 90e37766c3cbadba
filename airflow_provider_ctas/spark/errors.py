"""Spark's exceptions read as provider errors: the condition, a one-line reason, the stable code.

One place for all of it, so the driver entry point, the strategies and the Spark Connect runner
report a failure the same way.
"""

from __future__ import annotations

import re

from airflow_provider_ctas.core.errors import (
    METASTORE_UNREACHABLE_MARKERS,
    STORAGE_ACCESS_MARKERS,
    STORAGE_NOT_FOUND_MARKERS,
    CatalogUnavailableError,
    CtasError,
    QueryFailedError,
    SparkJobError,
    StorageAccessError,
    StorageNotFoundError,
    deterministic_condition,
)

GRPC_STATUS = re.compile(r"status = StatusCode\.(\w+)")
GRPC_DETAILS = re.compile(r'details = "(.*)"')


def error_condition(exc: BaseException) -> str:
    """Spark's error class (``TABLE_OR_VIEW_NOT_FOUND``, ...), or '' for other exceptions."""
    for name in ("getCondition", "getErrorClass"):
        getter = getattr(exc, name, None)
        if getter is None:
            continue
        try:
            value = getter()
        except Exception:  # noqa: S112, BLE001 - py4j may fail for non-Spark errors; try the next getter
            continue
        if value:
            return str(value)
    return ""


def first_line(exc: BaseException) -> str:
    """A one-line reason. gRPC errors (raw or wrapped by pyspark) open with a bare header line,
    ``<_InactiveRpcError of RPC that terminated with:``; their status and details follow it."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    status, details = GRPC_STATUS.search(text), GRPC_DETAILS.search(text)
    if text.startswith("<_") and status and details:
        return f"{status.group(1)}: {details.group(1)}"
    lines = text.splitlines()
    if lines[0].startswith("An error occurred while calling") and len(lines) > 1 and lines[1].startswith(": "):
        return f"{lines[0].rstrip('.')}: {lines[1][2:].strip()}"  # py4j: the Java exception is the second line
    return lines[0]


def classify(exc: BaseException) -> CtasError:
    """Map an exception from a phase to a provider error with a stable code."""
    if isinstance(exc, CtasError):
        return exc
    condition = error_condition(exc)
    text = f"{condition + ': ' if condition else ''}{first_line(exc)}"
    full = str(exc)
    if deterministic_condition(condition, full):
        return QueryFailedError(text)
    if any(marker in full for marker in STORAGE_NOT_FOUND_MARKERS):
        return StorageNotFoundError(f"the object store's bucket does not exist: {text}")
    if any(marker in full for marker in STORAGE_ACCESS_MARKERS):
        return StorageAccessError(f"the object store refused access (credentials?): {text}")
    if any(marker in full for marker in METASTORE_UNREACHABLE_MARKERS):
        return CatalogUnavailableError(
            f"the Hive metastore did not answer (spark.hadoop.hive.metastore.uris; is it running?): {text}"
        )
    return SparkJobError(text)
