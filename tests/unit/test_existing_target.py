"""A failed rename waits briefly for a concurrent creator's metastore commit before deciding."""

from __future__ import annotations

import time

from airflow_provider_ctas.catalogs.existing_target import appeared


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
