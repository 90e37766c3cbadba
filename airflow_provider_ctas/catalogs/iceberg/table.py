"""The two-phase table for Iceberg.

A new target is staged as its own Iceberg table under a reserved name, created empty with its
ownership markers, and published by a catalog rename (one metastore call; Iceberg tables do not
move their files). A replaced target is staged on a branch of the target itself,
``ctas_<txn>_t<try>``, created at begin from the current ``main``; the publish points ``main`` at the
branch's snapshot in one compare-and-swap of the table metadata whose preconditions are checked on
the very metadata it replaces (see ``metadata.py``).
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
    PROVIDER_PROPERTY_PREFIX,
    TableRef,
    validate_columns,
    validate_table_properties,
    validate_target,
)
from airflow_provider_ctas.core.transaction import TwoPhaseTable, _exact_fields, register_kind

FORMAT = "iceberg"
BRANCH_PREFIX = "ctas_"
FENCE_PREFIX = PROVIDER_PROPERTY_PREFIX + "fence."
"""``airflow_ctas.fence.<txn_id>`` on a replaced target: the newest try of that transaction that began."""


def validate_mode(mode: object) -> Mode:
    return table_modes.validate_mode(mode, "Iceberg")


def validate_format(table_format: object) -> str:
    if not isinstance(table_format, str) or table_format.lower() != FORMAT:
        raise InvalidInputError(f"table_format {table_format!r} is not served by the Iceberg strategy")
    return FORMAT


def branch_name(txn_id: str, try_number: int) -> str:
    return f"{BRANCH_PREFIX}{markers.txn_tag(txn_id)}_t{try_number}"


def branch_try(name: str, txn_id: str) -> int | None:
    """The try a branch of this transaction belongs to; None for any other branch."""
    prefix = f"{BRANCH_PREFIX}{markers.txn_tag(txn_id)}_t"
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def fence_key(txn_id: str) -> str:
    return FENCE_PREFIX + txn_id


@register_kind
@dataclass(kw_only=True)
class IcebergTable(TwoPhaseTable):
    kind = "iceberg"

    mode: Mode
    partition_by: tuple[str, ...] = ()
    table_properties: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse_target(cls, text: object) -> TableRef:
        return validate_target(text, named_catalog=True)

    def staging_table(self, try_number: int | None = None) -> TableRef:
        return self.target.with_table(markers.staging_name(self.txn_id, try_number or self.try_number))

    @property
    def branch(self) -> str:
        return branch_name(self.txn_id, self.try_number)

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
