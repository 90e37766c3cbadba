"""What the operator raises: one Airflow exception class per error family, so that an Airflow 3.3
``retry_policy`` (``ExceptionRetryPolicy`` / ``RetryRule``, which match on the exception's type) can
treat them differently, e.g. retry a lost first-use create race (``CtasPublishFailed``) sooner.

Families a retry can help subclass ``AtomicCtasRetryable`` (an ``AirflowException``: Airflow
retries while the task has tries, and a retry policy may decide otherwise); the rest subclass
``AtomicCtasFailure`` (an ``AirflowFailException``: the task fails at once; Airflow never consults a
retry policy for these). Every one carries the provider's error ``code``.
"""

from __future__ import annotations

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_provider_ctas.core.errors import CtasError


class AtomicCtasRetryable(AirflowException):
    """A failure another try may not hit; the message starts with ``[CODE]``."""

    code = "CTAS_ERROR"


class AtomicCtasFailure(AirflowFailException):
    """A failure every try repeats: the task fails without retrying."""

    code = "CTAS_ERROR"


class CtasSparkFailed(AtomicCtasRetryable):
    """SPARK_ERROR: Spark failed (lost executor, OOM, killed, metastore down)."""

    code = "SPARK_ERROR"


class CtasPublishFailed(AtomicCtasRetryable):
    """PUBLISH_FAILED: the publish failed and the target is as it was (a metastore briefly
    unreachable; a ``replace`` whose target another writer created meanwhile). Retried."""

    code = "PUBLISH_FAILED"


class CtasCoordinatorLost(AtomicCtasRetryable):
    """COORDINATOR_LOST: the driver lost its task before the publish and removed its staging."""

    code = "COORDINATOR_LOST"


class CtasAuditFailedRetryable(AtomicCtasRetryable):
    """AUDIT_FAILED with ``retry_on_failed_checks=True``."""

    code = "AUDIT_FAILED"


class CtasInvalidInput(AtomicCtasFailure):
    code = "INVALID_INPUT"


class CtasQueryError(AtomicCtasFailure):
    code = "QUERY_ERROR"


class CtasQueryFailed(AtomicCtasFailure):
    code = "QUERY_FAILED"


class CtasAuditFailed(AtomicCtasFailure):
    code = "AUDIT_FAILED"


class CtasTargetExists(AtomicCtasFailure):
    code = "TARGET_EXISTS"


class CtasUnsupportedTarget(AtomicCtasFailure):
    code = "UNSUPPORTED_TARGET"


class CtasFenced(AtomicCtasFailure):
    code = "FENCED"


_RETRYABLE = {cls.code: cls for cls in (CtasSparkFailed, CtasPublishFailed, CtasCoordinatorLost)}
_FAILURES = {
    cls.code: cls
    for cls in (
        CtasInvalidInput,
        CtasQueryError,
        CtasQueryFailed,
        CtasAuditFailed,
        CtasTargetExists,
        CtasUnsupportedTarget,
        CtasFenced,
    )
}


def airflow_exception(error: CtasError) -> AirflowException:
    """The Airflow exception for a provider error: its family's class, or the family's base for a
    code without one of its own (DATABASE_NOT_FOUND, CORRUPT_STATE, ...)."""
    message = f"[{error.code}] {error}"
    raised: AtomicCtasRetryable | AtomicCtasFailure
    if error.retryable:
        cls = CtasAuditFailedRetryable if error.code == "AUDIT_FAILED" else _RETRYABLE.get(error.code)
        raised = (cls or AtomicCtasRetryable)(message)
    else:
        raised = _FAILURES.get(error.code, AtomicCtasFailure)(message)
    raised.code = error.code
    return raised
