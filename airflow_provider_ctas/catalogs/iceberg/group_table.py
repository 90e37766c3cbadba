"""A publish group as a two-phase table (kind ``iceberg_group``): its transaction is the publisher
task instance's, its members are the members' serialized Iceberg tables as they held their staging
(``group.py`` publishes them). Plain data, read strictly, like every two-phase table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.core.errors import CorruptStateError
from airflow_provider_ctas.core.identifiers import PROVIDER_PROPERTY_PREFIX, TableRef, validate_target
from airflow_provider_ctas.core.protocol import GROUP_KIND
from airflow_provider_ctas.core.transaction import TwoPhaseTable, TxnState, _exact_fields, load_table, register_kind

GROUP = PROVIDER_PROPERTY_PREFIX + "group"
"""On each member's published version: the publisher's transaction (the group's run)."""
GROUP_SNAPSHOTS = PROVIDER_PROPERTY_PREFIX + "group_snapshots"
"""On each member's published version: every member's published snapshot (JSON), so a reader can
read the whole group as one version (``VERSION AS OF``) whatever its catalog's reads interleave with."""


def held(member: IcebergTable) -> dict[str, Any]:
    """What a member's hold phase reported; CorruptStateError when it did not hold."""
    record = member.details.get("held")
    if not isinstance(record, dict) or not isinstance(record.get("snapshot_id"), int):
        raise CorruptStateError(f"{member.target} (try {member.try_number}) holds no staged snapshot")
    return record


@register_kind
@dataclass(kw_only=True)
class IcebergGroup(TwoPhaseTable):
    kind = GROUP_KIND
    members: tuple[IcebergTable, ...] = field(default_factory=tuple)

    @classmethod
    def parse_target(cls, text: object) -> TableRef:
        return validate_target(text, named_catalog=True)

    def spec_to_dict(self) -> dict[str, Any]:
        return {"members": [member.to_dict() for member in self.members]}

    @classmethod
    def spec_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        spec = _exact_fields(data, {"members"}, "spec")
        if not isinstance(spec["members"], list) or not spec["members"]:
            raise CorruptStateError("a publish group's members must be a non-empty list")
        members = tuple(load_table(member) for member in spec["members"])
        if not all(isinstance(member, IcebergTable) for member in members):
            raise CorruptStateError("a publish group's members must be Iceberg tables")
        return {"members": check_members(members)}  # type: ignore[arg-type]


def check_members(members: tuple[IcebergTable, ...]) -> tuple[IcebergTable, ...]:
    """Members that can be in one group: distinct tables in one catalog."""
    targets = [member.target.qualified for member in members]
    if len(set(targets)) != len(targets):
        raise CorruptStateError(f"a publish group names a table twice: {sorted(targets)}")
    catalogs = {member.target.catalog for member in members}
    if len(catalogs) != 1:
        raise CorruptStateError(f"a publish group's tables must be in one catalog, not {sorted(map(str, catalogs))}")
    return members


def require_held(members: tuple[IcebergTable, ...]) -> None:
    """Only members that prepared and hold their staging can be published (an abort takes any)."""
    for member in members:
        held(member)
        if member.state is not TxnState.PREPARED:
            raise CorruptStateError(f"{member.target} is {member.state.value}, not prepared")
