"""Errors of the transaction layer.

Each carries a stable ``code`` so that an error raised inside the Spark driver can be reported
across the process boundary and re-raised on the Airflow side as the same kind of error.
"""

from __future__ import annotations


class CtasError(Exception):
    """Base class; ``retryable`` tells the operator whether another try can help."""

    code = "CTAS_ERROR"
    retryable = True


class InvalidInputError(CtasError, ValueError):
    """User input (names, options, SQL shape) that can never succeed; found before Spark work."""

    code = "INVALID_INPUT"
    retryable = False


class AtomicityNotSupportedError(CtasError):
    """The target cannot be made atomic by any registered catalog strategy."""

    code = "ATOMICITY_NOT_SUPPORTED"
    retryable = False


class CorruptStateError(CtasError):
    """Serialized state that does not describe a transaction we can trust; fail closed."""

    code = "CORRUPT_STATE"
    retryable = False


class InvalidTransitionError(CtasError):
    """A lifecycle call that the transaction's state does not allow."""

    code = "INVALID_TRANSITION"
    retryable = False


class TargetExistsError(CtasError):
    """``create`` found a target this transaction did not publish."""

    code = "TARGET_EXISTS"
    retryable = False


class DatabaseNotFoundError(CtasError):
    code = "DATABASE_NOT_FOUND"
    retryable = False


class QueryError(CtasError):
    """The SELECT does not analyse (bad column, missing table, not a query)."""

    code = "QUERY_ERROR"
    retryable = False


class QueryFailedError(CtasError):
    """The query failed on its data in a way that fails identically on every try (``raise_error``, an
    ANSI cast or arithmetic error, ...): not retried."""

    code = "QUERY_FAILED"
    retryable = False


# Spark error conditions of the query's own evaluation: the same data fails the same way again.
DETERMINISTIC_CONDITIONS = (
    "USER_RAISED_EXCEPTION",
    "DIVIDE_BY_ZERO",
    "INTERVAL_DIVIDED_BY_ZERO",
    "ARITHMETIC_OVERFLOW",
    "BINARY_ARITHMETIC_OVERFLOW",
    "CAST_INVALID_INPUT",
    "CAST_OVERFLOW",
    "NUMERIC_VALUE_OUT_OF_RANGE",
    "INVALID_ARRAY_INDEX",
    "INVALID_INDEX_OF_ZERO",
    "DATETIME_OVERFLOW",
    "DATETIME_FIELD_OUT_OF_BOUNDS",
    "CANNOT_PARSE_TIMESTAMP",
    "INVALID_FRACTION_OF_SECOND",
    "NULL_MAP_KEY",
    "DUPLICATED_MAP_KEY",
    "EXCEED_LIMIT_LENGTH",
)


def deterministic_condition(condition: str, message: str) -> str | None:
    """The deterministic condition an error names (its own, or one quoted in a failed job's message)."""
    for name in DETERMINISTIC_CONDITIONS:
        if condition.startswith(name) or f"[{name}" in message:
            return name
    return None


class AuditFailedError(CtasError):
    """A check on the staged version failed; nothing was published. Not retried unless the task asks
    for it (``retry_on_failed_checks``): the same data fails the same checks again."""

    code = "AUDIT_FAILED"
    retryable = False


class StorageNotFoundError(CtasError):
    """The object store's bucket (or container) of the target's database does not exist."""

    code = "STORAGE_NOT_FOUND"
    retryable = False


class StorageAccessError(CtasError):
    """The object store refused the credentials (or there are none)."""

    code = "STORAGE_ACCESS_DENIED"
    retryable = False


class CatalogUnavailableError(CtasError):
    """The table's catalog service (a Hive metastore, an Iceberg REST or JDBC catalog) could not be
    reached or refused the credentials; a retry may find it back. Whatever the try staged stays
    until its abort, the next try or a GC pass removes it."""

    code = "CATALOG_UNAVAILABLE"


# What Hive's metastore client says when no metastore URI answers (Hive 2.3's RetryingMetaStoreClient).
METASTORE_UNREACHABLE_MARKERS = (
    "Could not connect to meta store using any of the URIs provided",
    "Unable to instantiate org.apache.hadoop.hive.ql.metadata.SessionHiveMetaStoreClient",
)


# What S3A (and the GCS/ABFS connectors) say when a bucket is missing or access is refused.
STORAGE_NOT_FOUND_MARKERS = ("UnknownStoreException", "NoSuchBucket", "ContainerNotFound", "bucket does not exist")
STORAGE_ACCESS_MARKERS = ("AccessDeniedException", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoAuthWithAWS")


class UnsupportedTargetError(CtasError):
    """The existing target is of a kind this strategy must not touch (a view, an external table)."""

    code = "UNSUPPORTED_TARGET"
    retryable = False


class FencedError(CtasError):
    """A newer try of the same transaction has begun; this try must not publish."""

    code = "FENCED"
    retryable = False


class PublishError(CtasError):
    """The publish step failed; the target was left as it was before this try."""

    code = "PUBLISH_FAILED"


class SparkJobError(CtasError):
    """Spark failed for a reason that another try may not hit (lost executor, OOM, ...)."""

    code = "SPARK_ERROR"


class SparkNotFoundError(CtasError):
    """spark-submit is not on the worker's PATH; no retry can fix that."""

    code = "SPARK_SUBMIT_NOT_FOUND"
    retryable = False


class UnsupportedSparkError(CtasError):
    """The driver's (or Connect server's) Spark is a release the phases cannot run on."""

    code = "UNSUPPORTED_SPARK"
    retryable = False


class SparkInstallError(CtasError):
    """The worker's pyspark is a mix of two releases; no retry can fix that."""

    code = "PYSPARK_INSTALL_MIXED"
    retryable = False


class LeftoverError(CtasError):
    """Something blocks the target that this provider did not create and will not delete."""

    code = "FOREIGN_LEFTOVER"
    retryable = False


class CoordinatorLostError(CtasError):
    """The task process that decides this try's commit is gone, said abort, or sent a message that
    cannot be trusted: the driver removed its staging instead of publishing."""

    code = "COORDINATOR_LOST"


class DecisionPathError(CtasError):
    """In cluster deploy mode the task could not open the decision channel to its driver (the
    ResourceManager, the driver's NodeManager or the driver's announced port did not answer from the
    worker): the driver waited for the task before any write, and was killed. A retry may find the
    path open; a deployment that blocks it needs the ports the message names opened."""

    code = "DECISION_PATH_UNAVAILABLE"


class GroupMemberFailedError(CtasError):
    """A publish group's member did not prepare (it failed, was killed, or was skipped): no member
    is published, and the prepared members' staging is removed. Re-run the group once the member's
    cause is fixed."""

    code = "GROUP_MEMBER_FAILED"
    retryable = False


def _family(cls: type[CtasError]) -> list[type[CtasError]]:
    return [cls, *(member for sub in cls.__subclasses__() for member in _family(sub))]


# Every error class is found by its code: one left out would come back as a retryable CTAS_ERROR.
_BY_CODE: dict[str, type[CtasError]] = {cls.code: cls for cls in _family(CtasError)}


def error_from_code(code: str, message: str) -> CtasError:
    """Rebuild an error reported by the Spark side; unknown codes become a plain ``CtasError``."""
    return _BY_CODE.get(code, CtasError)(message)
