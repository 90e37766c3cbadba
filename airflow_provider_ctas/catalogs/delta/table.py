"""The two-phase table for Delta.

A new target is staged as its own Delta table under a reserved name, written with its ownership
markers, and published by a catalog rename. An existing target is written in place by one Delta
commit (``CREATE OR REPLACE`` of data, schema and properties, or a dynamic partition overwrite)
that Delta itself fences: every try of a task instance writes as the Delta application
``airflow_ctas:<txn_id>`` with its try number as the version. Delta skips a write whose version is
not above the one recorded for the application, and fails one during which another commit recorded
a version for it (``ConcurrentTransactionException``). Begin of try *t* records version *t* - 1 in an
empty commit: from then on no earlier try can commit; and if Delta skips that commit, try *t* - 1's
write had landed (``already_published``).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_ctas.catalogs.table_modes import WholeTable
from airflow_provider_ctas.core.identifiers import (
    TableRef,
    validate_target,
)
from airflow_provider_ctas.core.transaction import register_kind

FORMAT = "delta"
APP_ID_PREFIX = "airflow_ctas:"


def write_version(try_number: int) -> int:
    """What the write of ``try_number`` carries; begin of the next try records it, fencing this try."""
    return try_number


@register_kind
@dataclass(kw_only=True)
class DeltaTable(WholeTable):
    kind = "delta"
    table_format = FORMAT
    format_name = "Delta"
    no_swap_because = "a replace is one Delta commit"
    overwrites_partitions = True

    @classmethod
    def parse_target(cls, text: object) -> TableRef:
        return validate_target(text)

    @property
    def app_id(self) -> str:
        return APP_ID_PREFIX + self.txn_id
