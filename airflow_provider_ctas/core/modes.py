"""The operator's ``mode``: one vocabulary for the operator, every strategy and the wire, and its
rules in one place (which modes a format serves, what a mode needs)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from airflow_provider_ctas.core.errors import InvalidInputError


class Mode(StrEnum):
    CREATE = "create"
    """Publish a new table; fail if the target exists (unless this transaction published it)."""
    CREATE_IF_NOT_EXISTS = "create_if_not_exists"
    """Publish a new table, or succeed without publishing when the target exists."""
    REPLACE = "replace"
    """Publish a new version of the whole table, atomically."""
    OVERWRITE_PARTITIONS = "overwrite_partitions"
    """(Re)build the partitions the query produces inside a partitioned table, each atomically."""

    @property
    def always_publishes(self) -> bool:
        """Whether a successful task always published (or found its own earlier publish)."""
        return self is not Mode.CREATE_IF_NOT_EXISTS


def parse_mode(
    value: object, *, served: Iterable[Mode] = tuple(Mode), format_name: str = "", partition_by: object = None
) -> Mode:
    """``value`` as a Mode this format serves; with ``partition_by`` given (a sequence of column
    names), also the rule that ``overwrite_partitions`` names the partitions it overwrites."""
    served = tuple(served)
    what = f" for {format_name}" if format_name else ""
    if isinstance(value, str) and value == Mode.OVERWRITE_PARTITIONS and Mode.OVERWRITE_PARTITIONS not in served:
        raise InvalidInputError(
            f"mode 'overwrite_partitions' is not supported for {format_name} tables yet; use mode 'replace' "
            "(the whole table, published atomically) or a session-catalog table format"
        )
    if not isinstance(value, str) or value not in {m.value for m in served}:
        raise InvalidInputError(f"mode {value!r} is not supported{what}; use one of: {', '.join(served)}")
    mode = Mode(value)
    if partition_by is not None and mode is Mode.OVERWRITE_PARTITIONS and not partition_by:
        raise InvalidInputError("mode 'overwrite_partitions' needs partition_by (the partitions it overwrites)")
    return mode
