"""The claim on a target's name that keeps two creators' renames into it from overlapping: who
waits, who takes a claim over, and what is never removed. The catalog is a dictionary of views; the
real metastore's side is tests/integration/test_name_claim.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_ctas.catalogs.metastore import name_claim
from airflow_provider_ctas.catalogs.metastore.name_claim import claim_of, name_claimed
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import LeftoverError, PublishError
from airflow_provider_ctas.core.identifiers import TableRef
from tests.support.reporter import RecordingReporter

TARGET = TableRef("db", "orders")
CLAIM = claim_of(TARGET)
TXN, OTHER = "0123456789abcdef" * 2, "fedcba9876543210" * 2


def owner(txn: str = TXN, try_number: int = 2, age: timedelta = timedelta(0)) -> dict[str, str]:
    born = (datetime.now(UTC) - age).isoformat()
    return {markers.TXN_ID: txn, markers.TRY_NUMBER: str(try_number), markers.TARGET: TARGET.qualified,
            markers.DAG_ID: "dag", markers.TASK_ID: "task", markers.CREATED_AT: born}  # fmt: skip


class Views:
    """A catalog holding views by name; ``release_after`` polls, the holder's claim goes."""

    def __init__(
        self, held: Mapping[str, str] | None = None, release_after: int | None = None, shared: bool = True
    ) -> None:
        self.views: dict[str, dict[str, str]] = {CLAIM.table: dict(held)} if held is not None else {}
        self.is_shared = shared
        self.release_after = release_after
        self.reads = 0
        self.dropped: list[dict[str, str]] = []

    def shared(self) -> bool:
        return self.is_shared

    def create_view(self, ref: TableRef, comment: str, properties: Mapping[str, str]) -> None:
        if ref.table in self.views:
            raise RuntimeError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] {ref}")
        self.views[ref.table] = dict(properties)

    def properties(self, ref: TableRef) -> dict[str, str] | None:
        self.reads += 1
        if self.release_after is not None and self.reads > self.release_after:
            self.views.pop(ref.table, None)
            self.release_after = None
        found = self.views.get(ref.table)
        return dict(found) if found is not None else None

    def drop_view(self, ref: TableRef) -> None:
        self.dropped.append(self.views.pop(ref.table))


def claim(
    catalog: Views, mine: Mapping[str, str], wait_seconds: float = 5.0, log: RecordingReporter | None = None
) -> list[dict[str, str]]:
    """Run a rename under the claim; returns the claims present while it ran."""
    during: list[dict[str, str]] = []
    with name_claimed(catalog, TARGET, mine, log or RecordingReporter(), wait_seconds=wait_seconds):
        during.append(dict(catalog.views[CLAIM.table]))
    return during


def test_a_free_name_is_claimed_for_the_rename_and_released_after():
    catalog, mine = Views(), owner()
    assert claim(catalog, mine) == [mine]
    assert catalog.views == {} and catalog.dropped == [mine]
    assert CLAIM.database == "db" and markers.parse_reserved_name(CLAIM.table) == markers.ReservedName(
        markers.claim_name(TARGET.qualified)[7:23], "claim", 0
    )


def test_a_metastore_no_other_process_shares_needs_no_claim():
    """Spark's embedded Derby: one process at a time, whose catalog calls Spark serializes."""
    held = owner(txn=OTHER)
    catalog = Views(held=held, shared=False)
    with name_claimed(catalog, TARGET, owner(), RecordingReporter(), wait_seconds=0.0):
        pass
    assert catalog.views == {CLAIM.table: held} and catalog.dropped == []
    assert catalog.reads == 0, "nothing read, nothing created"


def test_a_claim_is_released_when_the_rename_fails():
    catalog = Views()
    with (
        pytest.raises(RuntimeError, match="rename failed"),
        name_claimed(catalog, TARGET, owner(), RecordingReporter()),
    ):
        raise RuntimeError("rename failed")
    assert catalog.views == {}


def test_an_earlier_try_s_claim_is_taken_over_at_once():
    """Killed inside its claim: the next try of the task instance does not wait for it."""
    catalog, mine, log = Views(held=owner(try_number=1)), owner(try_number=2), RecordingReporter()
    assert claim(catalog, mine, wait_seconds=0.0, log=log) == [mine]
    assert catalog.dropped[0][markers.TRY_NUMBER] == "1"
    assert any(line.startswith(f"took over {CLAIM}") and "try 1" in line for line in log.lines), log.lines


def test_another_creator_s_claim_is_waited_for_and_then_taken():
    catalog, mine, log = Views(held=owner(txn=OTHER, try_number=1), release_after=2), owner(), RecordingReporter()
    assert claim(catalog, mine, log=log) == [mine]
    holder = f"transaction {OTHER} (dag.task, try 1)"
    assert log.lines == [f"waiting for {holder}'s rename into {TARGET} ({CLAIM})",
                         f"claimed {TARGET}'s name after {holder} released it"]  # fmt: skip
    assert catalog.dropped == [mine], "the other creator's claim was dropped by this one"


def test_a_claim_held_past_the_wait_fails_the_publish_and_stays():
    held = owner(txn=OTHER, try_number=5)
    catalog = Views(held=held)
    with pytest.raises(PublishError, match=f"claimed by transaction {OTHER} .*try 5.*next try looks again"):
        claim(catalog, owner(), wait_seconds=0.6)
    assert catalog.views == {CLAIM.table: held}
    newer = owner(try_number=3)  # a newer try of this task instance holds it: waited for too
    with pytest.raises(PublishError):
        claim(Views(held=newer), owner(try_number=2), wait_seconds=0.0)


def test_a_stale_claim_is_taken_over():
    stale = owner(txn=OTHER, age=timedelta(seconds=name_claim.CLAIM_STALE_SECONDS + 60))
    catalog, mine = Views(held=stale), owner()
    assert claim(catalog, mine, wait_seconds=0.0) == [mine]
    assert catalog.dropped[0] == stale


def test_a_view_without_the_provider_s_markers_is_never_removed():
    foreign = {"note": "somebody's view"}
    catalog = Views(held=foreign)
    with pytest.raises(LeftoverError, match="no markers of this provider"):
        claim(catalog, owner())
    posing = {**owner(txn=OTHER, try_number=1), markers.TARGET: "spark_catalog.db.other"}  # not this name's
    with pytest.raises(LeftoverError):
        claim(Views(held=posing), owner())
    assert catalog.views == {CLAIM.table: foreign} and catalog.dropped == []


def test_a_claim_taken_over_meanwhile_is_not_released_by_its_first_holder():
    catalog, mine = Views(), owner()
    taker = owner(txn=OTHER)
    with name_claimed(catalog, TARGET, mine, RecordingReporter()):
        catalog.views[CLAIM.table] = taker  # taken over as stale while this rename hung
    assert catalog.views == {CLAIM.table: taker}


def test_claim_names_are_the_target_s_and_never_a_transaction_s_staging():
    name = markers.claim_name("spark_catalog.db.orders")
    assert name == markers.claim_name("SPARK_CATALOG.db.Orders") != markers.claim_name("spark_catalog.db.order")
    assert markers.newer_staging([name, markers.staging_name(TXN, 3)], TXN, 1) == [markers.staging_name(TXN, 3)]
    assert markers.is_claim({markers.TXN_ID: TXN, markers.TARGET: "spark_catalog.db.orders"}, name)
    assert not markers.is_claim({markers.TARGET: "spark_catalog.db.orders"}, name)
