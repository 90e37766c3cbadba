"""What a soak run's reader may see, and how a reading that breaks the invariant is told apart from
the two windows README documents (pure logic: no Spark, no Airflow)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.soak.schedule import Schedule
from tests.support.faults import check_observations, summarize

OLD_ROWS, NEW_ROWS = 300, 400
"""The target's rows before the run (four partitions of 75 for ``overwrite_partitions``), and the
new version's (four of 100)."""
HALF_SWITCHED = frozenset((OLD_ROWS * (4 - k) + NEW_ROWS * k) // 4 for k in (1, 2, 3))
"""What a reader counts in a listing of an ``overwrite_partitions`` switch half applied: some of the
four partitions new, the others old, each whole (325, 350, 375 rows)."""


def allowed(schedule: Schedule) -> set[Any]:
    """The readings the run's mode and faults allow: the old version or the new, and the swap's window."""
    readings: set[Any] = {NEW_ROWS, "missing" if schedule.mode == "create" else OLD_ROWS}
    if schedule.mode == "swap":
        readings |= {"missing", 0, "files-gone", "unavailable"}
    if any(f.kind == "metastore-restart" for f in schedule.faults):
        readings |= {"unavailable"}
    return readings


def in_fence_window(schedule: Schedule) -> bool:
    """A driver held between its last ownership check and its flip or partition switch while its
    staging can be removed under it (a cleared try's, by the next try; a timed-out try's, by its own
    abort): README's fencing limit, where readers may see the table empty until the driver switches
    back. Counted on its own, as the after-commit window is. Iceberg and Delta tables are not exposed:
    their catalog refuses a superseded commit."""
    return (
        schedule.table_format == "parquet"
        and schedule.mode in ("replace", "overwrite_partitions")
        and any(f.kind in ("clear", "timeout") and f.point == "publish_checked" for f in schedule.faults)
    )


def half_switched_listing_allowed(schedule: Schedule, metastore: str) -> bool:
    """A partition switch on a metastore that does not read a listing from one snapshot (Derby, the
    default test run's) may be seen half applied: README's limit. Counted on its own; on PostgreSQL
    (``scripts/soak.sh``'s default) such a reading breaks the invariant."""
    return metastore == "derby" and schedule.table_format == "parquet" and schedule.mode == "overwrite_partitions"


@dataclass(frozen=True)
class Verdict:
    problem: str | None = None
    """Why the readings break the invariant; None when they keep it or fall in a documented window."""
    fence_window: str | None = None
    derby_listing: str | None = None


def judge(values: list[Any], schedule: Schedule, metastore: str) -> Verdict:
    """The reader's observations of one run, against what README allows."""
    seen = check_observations(values, allowed(schedule), NEW_ROWS)
    if seen is None:
        return Verdict()
    if in_fence_window(schedule):
        return Verdict(fence_window=f"{seen} ({summarize(values)})")
    if half_switched_listing_allowed(schedule, metastore) and (
        check_observations(values, allowed(schedule) | HALF_SWITCHED, NEW_ROWS) is None
    ):
        return Verdict(derby_listing=f"{seen} ({summarize(values)})")
    return Verdict(problem=seen)
