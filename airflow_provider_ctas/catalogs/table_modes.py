"""The modes of the strategies whose table format has its own table-wide schema (Iceberg, Delta):
a whole table is created or replaced; partition overwrites are not built for them yet."""

from __future__ import annotations

from enum import StrEnum

from airflow_provider_ctas.core.errors import InvalidInputError


class Mode(StrEnum):
    CREATE = "create"
    CREATE_IF_NOT_EXISTS = "create_if_not_exists"
    REPLACE = "replace"


def validate_mode(mode: object, format_name: str) -> Mode:
    if mode == "overwrite_partitions":
        raise InvalidInputError(
            f"mode 'overwrite_partitions' is not supported for {format_name} tables yet; use mode 'replace' "
            "(the whole table, published atomically) or a session-catalog table format"
        )
    if not isinstance(mode, str) or mode not in Mode._value2member_map_:
        raise InvalidInputError(f"mode {mode!r} is not supported for {format_name}; use one of: {', '.join(Mode)}")
    return Mode(mode)
