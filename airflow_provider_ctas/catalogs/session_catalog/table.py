"""The two-phase table for Spark's session catalog.

Staging is a table under a reserved name in the target's database, created empty with its
ownership markers in the same ``CREATE TABLE`` and filled afterwards, so no data is ever written to
a directory that no marker covers. A new target is published with ``ALTER TABLE staging RENAME TO
target``; a replaced one with ``ALTER TABLE target SET LOCATION`` (same shape), or, only when
``allow_swap`` is set, by swapping two tables; partitions with ``ALTER TABLE target PARTITION (...)
SET LOCATION`` each (see the executor for what readers see).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.comments import Comments
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.identifiers import (
    TableRef,
    validate_columns,
    validate_table_properties,
)
from airflow_provider_ctas.core.modes import Mode, parse_mode
from airflow_provider_ctas.core.transaction import TwoPhaseTable, _exact_fields, register_kind

# Data sources Spark's session catalog writes as plain files. Avro needs the spark-avro jar on the
# cluster; without it Spark reports a missing data source while staging is created (before any job).
FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "avro", "text"})

DEFAULT_RETENTION_SECONDS = 3600
"""How long a superseded version stays on storage for readers that listed its files before the switch."""


def validate_retention(value: object) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds <= 366 * 86400:
        raise InvalidInputError(
            f"superseded_retention must be a timedelta or a number of seconds from 0 to 366 days, got {value!r}"
        )
    return int(seconds)


def validate_format(table_format: object) -> str:
    if not isinstance(table_format, str) or table_format.lower() not in FILE_FORMATS:
        raise InvalidInputError(
            f"table_format {table_format!r} is not a file format of Spark's session catalog; "
            f"use one of: {', '.join(sorted(FILE_FORMATS))}"
        )
    return table_format.lower()


@register_kind
@dataclass(kw_only=True)
class SessionCatalogTable(TwoPhaseTable):
    kind = "spark_session_catalog"
    format_name = "session-catalog"

    mode: Mode
    table_format: str
    partition_by: tuple[str, ...] = ()
    table_properties: dict[str, str] = field(default_factory=dict)
    allow_swap: bool = False
    superseded_retention_seconds: int = DEFAULT_RETENTION_SECONDS
    comments: Comments = field(default_factory=Comments)

    @property
    def replaces_partitions(self) -> bool:
        return self.mode is Mode.OVERWRITE_PARTITIONS

    def staging_table(self, try_number: int | None = None) -> TableRef:
        return self.target.with_table(markers.staging_name(self.txn_id, try_number or self.try_number))

    def backup_table(self, try_number: int | None = None) -> TableRef:
        return self.target.with_table(markers.backup_name(self.txn_id, try_number or self.try_number))

    def spec_to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "table_format": self.table_format,
            "partition_by": list(self.partition_by),
            "table_properties": dict(self.table_properties),
            "allow_swap": self.allow_swap,
            "superseded_retention_seconds": self.superseded_retention_seconds,
            "comments": self.comments.to_dict(),
        }

    @classmethod
    def spec_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        fields_ = {"mode", "table_format", "partition_by", "table_properties", "allow_swap"}
        # State stored before the retention or comments existed has no such field: the default.
        retention = "superseded_retention_seconds"
        spec = _exact_fields(data, fields_ | ({retention, "comments"} & set(data)), "spec")
        if not isinstance(spec["allow_swap"], bool):
            raise CorruptStateError("spec.allow_swap must be a boolean")
        try:
            return {
                "mode": parse_mode(spec["mode"]),
                "table_format": validate_format(spec["table_format"]),
                "partition_by": validate_columns(spec["partition_by"], "partition_by"),
                "table_properties": validate_table_properties(spec["table_properties"]),
                "allow_swap": spec["allow_swap"],
                retention: validate_retention(spec.get(retention, DEFAULT_RETENTION_SECONDS)),
                "comments": Comments.from_dict(spec["comments"]) if "comments" in spec else Comments(),
            }
        except InvalidInputError as exc:
            raise CorruptStateError(f"spec is invalid: {exc}") from exc
