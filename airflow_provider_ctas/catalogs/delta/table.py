"""The two-phase table for Delta.

A new target is staged as its own Delta table under a reserved name, written with its ownership
markers, and published by a catalog rename. A replaced target is written by one Delta commit (a
``CREATE OR REPLACE`` of the table, data, schema and properties together) that Delta itself fences:
every try writes as the Delta application ``airflow_ctas:<txn_id>``; begin records version ``2·try``
for it in an empty commit, and the write of try *t* carries version ``2·t + 1``. Delta skips a write
whose version is not above the recorded one, and fails one during which another commit recorded a
version for the same application (``ConcurrentTransactionException``): a try that a newer try has
begun can never commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_ctas.catalogs import table_modes
from airflow_provider_ctas.catalogs.table_modes import Mode
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.identifiers import (
    TableRef,
    validate_columns,
    validate_table_properties,
    validate_target,
)
from airflow_provider_ctas.core.transaction import TwoPhaseTable, _exact_fields, register_kind

FORMAT = "delta"
APP_ID_PREFIX = "airflow_ctas:"


def validate_mode(mode: object) -> Mode:
    return table_modes.validate_mode(mode, "Delta")


def validate_format(table_format: object) -> str:
    if not isinstance(table_format, str) or table_format.lower() != FORMAT:
        raise InvalidInputError(f"table_format {table_format!r} is not served by the Delta strategy")
    return FORMAT


def fence_version(try_number: int) -> int:
    """What begin of ``try_number`` records: above every version of the tries before it."""
    return 2 * try_number


def write_version(try_number: int) -> int:
    """What the write of ``try_number`` carries: above its own fence, below the next try's."""
    return 2 * try_number + 1


@register_kind
@dataclass(kw_only=True)
class DeltaTable(TwoPhaseTable):
    kind = "delta"

    mode: Mode
    partition_by: tuple[str, ...] = ()
    table_properties: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse_target(cls, text: object) -> TableRef:
        return validate_target(text)

    @property
    def app_id(self) -> str:
        return APP_ID_PREFIX + self.txn_id

    def staging_table(self, try_number: int | None = None) -> TableRef:
        return self.target.with_table(markers.staging_name(self.txn_id, try_number or self.try_number))

    def spec_to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "partition_by": list(self.partition_by),
            "table_properties": dict(self.table_properties),
        }

    @classmethod
    def spec_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        spec = _exact_fields(data, {"mode", "partition_by", "table_properties"}, "spec")
        try:
            return {
                "mode": validate_mode(spec["mode"]),
                "partition_by": validate_columns(spec["partition_by"], "partition_by"),
                "table_properties": validate_table_properties(spec["table_properties"]),
            }
        except InvalidInputError as exc:
            raise CorruptStateError(f"spec is invalid: {exc}") from exc
