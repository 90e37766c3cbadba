"""Publish groups' pure parts: the group as a two-phase table, the member argument, the wire."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.catalogs import load_two_phase_table, strategy_for
from airflow_provider_ctas.catalogs.iceberg.group_table import IcebergGroup, require_held
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import GROUP_COMMIT_PHASES, PhaseRequest, run_phases_for
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.operators.arguments import group_member

pytestmark = pytest.mark.unit


def _member(name: str, *, catalog: str = "lake", held: bool = True) -> IcebergTable:
    table = IcebergTable(
        key=TransactionKey("d", name, "r", -1), conn_id="spark_default",
        target=IcebergTable.parse_target(f"{catalog}.mart.{name}"), mode=Mode.REPLACE,
    )  # fmt: skip
    table.begin(1, "2026-11-28T00:00:00+00:00")
    table.mark_prepared(1, "2026-11-28T00:00:01+00:00")
    if held:
        table.details["held"] = {"branch": table.branch, "snapshot_id": 7, "base_snapshot_id": 6, "checks": None}
    return table


def _group(*members: IcebergTable) -> IcebergGroup:
    return IcebergGroup(
        key=TransactionKey("d", "publish", "r", -1), conn_id="spark_default", target=members[0].target,
        members=members,
    )  # fmt: skip


def test_a_group_round_trips_with_its_members_as_they_held() -> None:
    group = _group(_member("facts"), _member("dims"))
    loaded = load_two_phase_table(group.to_json())
    assert isinstance(loaded, IcebergGroup)
    assert [m.target.qualified for m in loaded.members] == ["lake.mart.facts", "lake.mart.dims"]
    assert loaded.members[1].details["held"]["snapshot_id"] == 7


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ((_member("facts"), _member("facts")), "names a table twice"),
        ((_member("facts"), _member("dims", catalog="other")), "in one catalog"),
    ],
)
def test_a_group_that_cannot_publish_together_does_not_load(members: tuple[IcebergTable, ...], message: str) -> None:
    with pytest.raises(CorruptStateError, match=message):
        load_two_phase_table(_group(*members).to_dict())


def test_only_held_members_can_be_published() -> None:
    require_held((_member("facts"),))
    with pytest.raises(CorruptStateError, match="holds no staged snapshot"):
        require_held((_member("facts"), _member("dims", held=False)))


def test_a_group_never_loads_a_member_of_another_kind() -> None:
    data = _group(_member("facts")).to_dict()
    data["spec"]["members"][0]["kind"] = "delta"
    with pytest.raises(CorruptStateError):
        load_two_phase_table(data)


def test_members_are_refused_where_no_catalog_can_commit_several_tables() -> None:
    iceberg, parquet = strategy_for("iceberg"), strategy_for("parquet")
    assert group_member(None, "parquet", parquet, "create") is None
    assert group_member("publish_mart", "iceberg", iceberg, "replace") == "publish_mart"
    with pytest.raises(InvalidInputError, match="only an Iceberg REST catalog"):
        group_member("publish_mart", "parquet", parquet, "replace")
    with pytest.raises(InvalidInputError, match="replaces existing tables"):
        group_member("publish_mart", "iceberg", iceberg, "create")
    with pytest.raises(InvalidInputError, match="task id"):
        group_member("publish mart; rm -rf /", "iceberg", iceberg, "replace")


def test_a_member_holds_instead_of_committing_and_only_a_group_commits_alone() -> None:
    assert run_phases_for([], hold=True) == ("begin", "prepare", "hold")
    assert run_phases_for([{"type": "row_count"}], hold=True) == ("begin", "prepare", "audit", "hold")
    group = _group(_member("facts")).to_dict()
    request = PhaseRequest(phases=GROUP_COMMIT_PHASES, table=group)
    assert PhaseRequest.from_json(request.to_json()).phases == ("commit",)
    with pytest.raises(CorruptStateError, match="publish group"):
        PhaseRequest.from_json(PhaseRequest(phases=GROUP_COMMIT_PHASES, table=_member("facts").to_dict()).to_json())
    with pytest.raises(CorruptStateError, match="publish group"):
        PhaseRequest.from_json(
            PhaseRequest(phases=("begin", "prepare", "commit"), table=group, sql="SELECT 1").to_json()
        )
