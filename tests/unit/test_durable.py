"""Durable tries, the pure parts: when a prepared staging may be adopted, what the record carries,
where the operator and the wire refuse the option, and when a driver keeps its staging."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.delta.strategy import STRATEGY as DELTA
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.durable import Candidate, PreparedRecord, adoptable, digest_of, mismatch
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.protocol import ABORT_PHASES, RUN_PHASES, PhaseRequest, PhaseResult
from airflow_provider_ctas.driver.phases import _kept_for_next_try
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.operators.arguments import durable_flag

pytestmark = pytest.mark.unit

SPEC = {"target": "db.t", "mode": "replace", "table_format": "parquet", "partition_by": []}
DIGEST = digest_of("SELECT 1 AS id", SPEC, [], {})
RECORD = PreparedRecord(
    txn_id="a" * 32,
    digest=DIGEST,
    prepared_by_try=1,
    held_by_try=1,
    row_count=10,
    mechanism="flip",
    columns=(("id", "int"),),
    registered=False,
    prepared_at="2026-11-28T00:00:00+00:00",
)


def test_the_digest_changes_with_the_query_the_settings_the_checks_and_the_conf_only():
    assert digest_of(" SELECT 1 AS id ", SPEC, [], {}) == DIGEST  # surrounding blanks do not change a query
    others = {
        digest_of("SELECT 2 AS id", SPEC, [], {}),
        digest_of("SELECT 1 AS id", {**SPEC, "partition_by": ["id"]}, [], {}),
        digest_of("SELECT 1 AS id", SPEC, [{"kind": "row_count", "min": 1}], {}),
        digest_of("SELECT 1 AS id", SPEC, [], {"spark.sql.ansi.enabled": "false"}),
    }
    assert DIGEST not in others and len(others) == 4


def test_the_record_round_trips_and_anything_garbled_reads_as_none():
    held = RECORD.held_by(3)
    assert PreparedRecord.parse(held.to_json()) == held and held.prepared_by_try == 1
    data = json.loads(RECORD.to_json())
    for change in ({"row_count": "10"}, {"registered": 1}, {"columns": [["id"]]}, {"checks": ["x"]}, {"digest": None}):
        assert PreparedRecord.parse(json.dumps({**data, **change})) is None
    assert PreparedRecord.parse("not json") is None and PreparedRecord.parse(None) is None


def _candidate(name_try: int, **changes: object) -> Candidate:
    return Candidate(f"/w/__ctas_x_s{name_try}", name_try, replace(RECORD, **changes))  # type: ignore[arg-type]


def test_only_an_earlier_try_of_the_same_transaction_and_digest_is_adopted_the_latest_holder_first():
    earlier = _candidate(1)
    re_held = _candidate(1, held_by_try=2)
    assert adoptable([earlier], RECORD.txn_id, 2, DIGEST) == earlier
    assert adoptable([earlier, re_held], RECORD.txn_id, 3, DIGEST) == re_held
    assert adoptable([re_held], RECORD.txn_id, 2, DIGEST) is None  # held by this very try already
    assert adoptable([earlier], "b" * 32, 2, DIGEST) is None
    assert adoptable([earlier], RECORD.txn_id, 2, "0" * 64) is None
    assert adoptable([_candidate(2)], RECORD.txn_id, 3, DIGEST) is None  # the name is not the writer's


def test_a_staging_for_another_publish_does_not_fit():
    assert mismatch(RECORD, mechanism="flip", columns=[("id", "int")], registered=False) == ""
    assert "rename" in mismatch(RECORD, mechanism="rename", columns=[("id", "int")], registered=True)
    assert "columns" in mismatch(RECORD, mechanism="flip", columns=[("id", "bigint")], registered=False)
    assert "kind" in mismatch(RECORD, mechanism="flip", columns=[("id", "int")], registered=True)


def test_the_operator_takes_durable_for_every_format_whose_strategy_keeps_prepared_tries():
    make: dict[str, Any] = {"task_id": "t", "sql": "SELECT 1", "target_table": "db.t"}
    assert AtomicCtasOperator(**make, durable=True).durable is True
    assert "durable" in AtomicCtasOperator.template_fields
    assert AtomicCtasOperator(**make, durable="{{ params.durable }}").durable == "{{ params.durable }}"
    assert AtomicCtasOperator(**make, table_format="delta", durable=True).durable is True
    with pytest.raises(InvalidInputError, match="not supported for 'delta'"):
        durable_flag(True, "delta", replace(DELTA, durable=False))
    iceberg = {**make, "target_table": "c.db.t", "mode": "replace"}
    assert AtomicCtasOperator(**iceberg, table_format="iceberg", durable="true").durable == "true"
    with pytest.raises(InvalidInputError, match="true or false"):
        AtomicCtasOperator(**make, durable="sometimes")


def test_the_wire_carries_a_digest_with_the_commit_phase_only():
    request = PhaseRequest(phases=RUN_PHASES, table={}, sql="SELECT 1", durable=DIGEST)
    assert PhaseRequest.from_json(request.to_json()) == request
    data = json.loads(request.to_json())
    for change in ({"durable": "short"}, {"durable": True}, {"phases": list(ABORT_PHASES)}):
        with pytest.raises(CorruptStateError):
            PhaseRequest.from_json(json.dumps({**data, **change}))


@dataclass
class _Link:
    lost: str | None
    aborted: bool = False


@dataclass
class _Executor:
    published: bool = False


def test_a_driver_keeps_its_staging_only_when_its_task_is_lost_at_the_decision_after_recording_it():
    recorded = PhaseResult(details={"prepared_record": "/w/__ctas_x_s1"})
    unrecorded = PhaseResult()  # durable off, or the record could not be written
    lost = _Link("the task process is gone")
    assert _kept_for_next_try("commit", recorded, lost, _Executor())  # type: ignore[arg-type]
    assert not _kept_for_next_try("commit", unrecorded, lost, _Executor())  # type: ignore[arg-type]
    assert not _kept_for_next_try("prepare", recorded, lost, _Executor())  # type: ignore[arg-type]
    assert not _kept_for_next_try("commit", recorded, _Link("the task decided abort", aborted=True), _Executor())  # type: ignore[arg-type]
    assert not _kept_for_next_try("commit", recorded, _Link(None), _Executor())  # type: ignore[arg-type]
    assert not _kept_for_next_try("commit", recorded, lost, _Executor(published=True))  # type: ignore[arg-type]
    assert not _kept_for_next_try("commit", recorded, None, _Executor())  # type: ignore[arg-type]


def test_a_reserved_name_promises_its_own_try_or_the_adopter_its_record_names():
    name = markers.ReservedName(tag="a" * 16, role="staging", try_number=1)
    own = {markers.TXN_ID: "a" * 32, markers.TRY_NUMBER: "1"}
    adopted = {markers.TXN_ID: "a" * 32, markers.TRY_NUMBER: "3"}
    assert ownership.is_staging_named(own, name)
    assert not ownership.is_staging_named(adopted, name)  # markers of another try, and no record says why
    assert ownership.is_staging_named(adopted, name, adopted_by=3)
    assert not ownership.is_staging_named(adopted, name, adopted_by=2)
    assert ownership.holds_staging(adopted, "a" * 32, 1, up_to=3)
    assert not ownership.holds_staging(adopted, "a" * 32, 1, up_to=2)  # a newer try holds it: not this one's to drop


def test_an_iceberg_kept_branch_is_adopted_by_a_later_try_of_its_transaction_with_its_digest():
    from airflow_provider_ctas.catalogs.iceberg import fence
    from airflow_provider_ctas.catalogs.iceberg.adoption import KeptBranch, candidate

    record = PreparedRecord(
        txn_id="t" * 32, digest="d" * 64, prepared_by_try=1, held_by_try=1, row_count=5, mechanism="branch",
        columns=(("id", "bigint"),), registered=False, prepared_at="2026-11-28T00:00:00+00:00",
    )  # fmt: skip
    kept = KeptBranch(record, snapshot_id=11, base_snapshot_id=10)
    assert KeptBranch.parse(kept.to_json()) == kept
    assert KeptBranch.parse("{not json") is None
    props = {fence.prepared_key("t" * 32, 1): kept.to_json(), fence.prepared_key("t" * 32, 2): "garbled"}
    assert candidate(props, "t" * 32, 2, "d" * 64) == kept
    assert candidate(props, "t" * 32, 2, "e" * 64) is None, "another digest: the query or settings changed"
    assert candidate(props, "u" * 32, 2, "d" * 64) is None, "another transaction's record"
    assert candidate(props, "t" * 32, 1, "d" * 64) is None, "only a later try adopts"
    adopted = kept.held_by(2)
    later = {fence.prepared_key("t" * 32, 2): adopted.to_json()}
    assert candidate(later, "t" * 32, 3, "d" * 64) == adopted, "an adopter's record is adoptable in turn"
    moved = {fence.prepared_key("t" * 32, 3): adopted.to_json()}
    assert candidate(moved, "t" * 32, 4, "d" * 64) is None, "a record under another try's key is not trusted"
    assert sorted(fence.keys_of({**props, fence.fence_key("t" * 32, 1): "{}"}, "t" * 32, up_to=1)) == [
        fence.fence_key("t" * 32, 1),
        fence.prepared_key("t" * 32, 1),
    ], "a try's record goes wherever its fence goes"
