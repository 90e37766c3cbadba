"""The two-phase table for Iceberg.

A new target is staged as its own Iceberg table under a reserved name, created empty with its
ownership markers, and published by a catalog rename (one metastore call; Iceberg tables do not
move their files). A replaced target is staged on a branch of the target itself,
``ctas_<txn>_t<try>``, created at begin from the current ``main``; the publish points ``main`` at the
branch's snapshot in one compare-and-swap of the table metadata whose preconditions are checked on
the very metadata it replaces (see ``metadata.py``). ``overwrite_partitions`` stages the same way,
its branch holding a dynamic partition overwrite, re-applied on a ``main`` that moved (``rebase.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_ctas.catalogs.table_modes import WholeTable
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.identifiers import TableRef, validate_target
from airflow_provider_ctas.core.transaction import register_kind

FORMAT = "iceberg"
BRANCH_PREFIX = "ctas_"


def branch_name(txn_id: str, try_number: int) -> str:
    return f"{BRANCH_PREFIX}{markers.txn_tag(txn_id)}_t{try_number}"


def branch_try(name: str, txn_id: str) -> int | None:
    """The try a branch of this transaction belongs to; None for any other branch."""
    prefix = f"{BRANCH_PREFIX}{markers.txn_tag(txn_id)}_t"
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


@register_kind
@dataclass(kw_only=True)
class IcebergTable(WholeTable):
    kind = "iceberg"
    table_format = FORMAT
    format_name = "Iceberg"
    no_swap_because = "a replace never swaps tables"
    overwrites_partitions = True
    partition_transforms = True

    @classmethod
    def parse_target(cls, text: object) -> TableRef:
        return validate_target(text, named_catalog=True)

    @property
    def branch(self) -> str:
        return branch_name(self.txn_id, self.try_number)
