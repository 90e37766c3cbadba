"""The chaos soak's schedules: a seed decides a run, and the faults it draws can all happen."""

from __future__ import annotations

import pytest

from tests.soak.schedule import DRIVER_POINTS, KINDS, MID_WRITE, MODE_POINTS, MODES, TASK_POINT, run_seeds, schedule_for

pytestmark = pytest.mark.unit


def test_a_seed_decides_its_runs_and_a_run_seed_decides_its_run():
    assert run_seeds(7, 5) == run_seeds(7, 5) and run_seeds(7, 5) != run_seeds(8, 5)
    assert run_seeds(7, 3) == run_seeds(7, 5)[:3]  # more runs of a seed extend its soak
    assert [schedule_for(s) for s in run_seeds(7, 20)] == [schedule_for(s) for s in run_seeds(7, 20)]


def test_every_fault_is_drawn_and_lands_where_its_mode_reaches():
    schedules = [schedule_for(seed) for seed in run_seeds(1, 400)]
    assert {s.mode for s in schedules} == set(MODES)
    assert {f.kind for s in schedules for f in s.faults} == set(KINDS)
    assert {s.durable for s in schedules} == {True, False}
    for schedule in schedules:
        reachable = {*DRIVER_POINTS, *MODE_POINTS.get(schedule.mode, ()), TASK_POINT, MID_WRITE, ""}
        assert {f.point for f in schedule.faults} <= reachable, schedule
        assert schedule.slow == any(f.point == MID_WRITE for f in schedule.faults)
        assert all(f.kind != "clear" for f in schedule.faults[:-1]), "a clear's next try is the run's last"
        assert str(schedule).startswith(f"seed {schedule.seed}: {schedule.mode}")
