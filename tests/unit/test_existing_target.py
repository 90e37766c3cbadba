"""A failed rename waits briefly for a concurrent creator's metastore commit before deciding."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from airflow_provider_ctas.catalogs.existing_target import after_lost_race, appeared
from airflow_provider_ctas.catalogs.progress import Progress
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import Outcome


def test_a_target_that_appears_while_the_rename_waits_is_found() -> None:
    reads = iter([None, None, "first_use"])
    assert appeared(lambda: next(reads), wait_seconds=5, pause=0.01) == "first_use"


def test_a_target_that_never_appears_is_none_once_the_wait_is_over() -> None:
    calls: list[float] = []

    def read() -> str | None:
        calls.append(time.monotonic())
        return None

    assert appeared(read, wait_seconds=0.1, pause=0.02) is None
    assert len(calls) >= 3, "read again while waiting"
    assert calls[-1] - calls[0] >= 0.1, "not given up before the wait is over"


TARGET = TableRef("db", "events")


@dataclass(frozen=True)
class _Table:
    target: TableRef = TARGET
    txn_id: str = "t" * 32
    mode: Mode = Mode.CREATE
    last_committed_try: int | None = None
    try_number: int = 2


@pytest.mark.parametrize("published_by", [1, 2])
def test_a_target_this_transaction_published_first_is_already_published(published_by: int) -> None:
    progress, details = Progress(), Details()
    props = {markers.TXN_ID: _Table.txn_id, markers.TRY_NUMBER: str(published_by)}
    after_lost_race(_Table(), props, progress, details)
    assert progress.outcome is Outcome.ALREADY_PUBLISHED and details["published_by_try"] == published_by


def test_a_target_a_newer_try_published_fences_this_one() -> None:
    """A try held past its check while its task instance was cleared (the chaos soak's seed
    1223369283): the newer try published, so this one must fail, not report it published."""
    progress = Progress()
    props = {markers.TXN_ID: _Table.txn_id, markers.TRY_NUMBER: "3"}
    with pytest.raises(FencedError, match="try 3 of this task instance published"):
        after_lost_race(_Table(), props, progress, Details())
    assert progress.outcome is None
