"""The chaos soak's verdict on what its reader saw: a half-applied partition switch is README's
limit on Derby only, and the fencing window is counted apart, never a mix of versions elsewhere."""

from __future__ import annotations

import pytest

from tests.soak.readings import HALF_SWITCHED, NEW_ROWS, OLD_ROWS, Verdict, judge
from tests.soak.schedule import Fault, Schedule

pytestmark = pytest.mark.unit

PARTITIONS = Schedule(1, "overwrite_partitions", durable=True, faults=(Fault("query-fails", ""),))
FLIP = Schedule(2, "replace", durable=False, faults=(Fault("kill-task", "after_prepare"),))


def test_the_old_then_the_new_version_keeps_the_invariant():
    assert judge([OLD_ROWS, OLD_ROWS, NEW_ROWS], PARTITIONS, "postgres") == Verdict()


def test_a_half_applied_switch_is_derby_s_documented_limit_and_a_violation_on_postgresql():
    seen = [OLD_ROWS, 375, NEW_ROWS]  # what the soak saw at bebdc7b (seed 667897545), on Derby
    on_derby = judge(seen, PARTITIONS, "derby")
    assert on_derby.problem is None and on_derby.derby_listing == "reader saw ['375'] (300 x1 -> 375 x1 -> 400 x1)"
    assert judge(seen, PARTITIONS, "postgres").problem == "reader saw ['375']"
    assert {325, 350, 375} == HALF_SWITCHED


def test_on_derby_what_is_no_whole_partition_mix_still_breaks_the_invariant():
    assert judge([OLD_ROWS, 360, NEW_ROWS], PARTITIONS, "derby").problem == "reader saw ['360']"
    assert judge([NEW_ROWS, 375], PARTITIONS, "derby").problem is not None, "old partitions after the new version"
    assert judge([OLD_ROWS, "missing"], PARTITIONS, "derby").problem is not None
    assert judge([OLD_ROWS, 350, NEW_ROWS], FLIP, "derby").problem is not None, "a flip has no partitions to mix"


def test_a_reading_in_the_fencing_window_is_counted_apart():
    held = Schedule(3, "replace", durable=False, faults=(Fault("clear", "publish_checked"),))
    verdict = judge([OLD_ROWS, 0, NEW_ROWS], held, "postgres")
    assert verdict.problem is None and verdict.fence_window is not None
