"""The chaos soak's schedules: a seed decides a run, and the faults it draws can all happen."""

from __future__ import annotations

import pytest

from tests.soak.schedule import (
    DRIVER_POINTS,
    FORMAT_MODES,
    FORMATS,
    KINDS,
    MID_WRITE,
    MODES,
    S3_KINDS,
    STALLED_BEGIN,
    TABLE_FORMATS,
    TASK_POINT,
    clear_points,
    formats_from,
    mode_points,
    run_seeds,
    schedule_for,
)

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
    stalled = {s.mode for s in schedules for f in s.faults if f.point == STALLED_BEGIN}
    assert stalled == set(MODES), "a try held inside its begin, in every mode"
    for schedule in schedules:
        reachable = {*DRIVER_POINTS, *mode_points("parquet", schedule.mode), TASK_POINT, MID_WRITE, ""}
        assert {f.point for f in schedule.faults if f.kind != "clear"} <= reachable, schedule
        assert {f.point for f in schedule.faults if f.kind == "clear"} <= set(clear_points("parquet", schedule.mode))
        assert schedule.slow == any(f.point == MID_WRITE for f in schedule.faults)
        assert all(f.kind != "clear" for f in schedule.faults[:-1]), "a clear's next try is the run's last"
        assert str(schedule).startswith(f"seed {schedule.seed}: {schedule.mode}")


def test_a_soak_of_several_formats_draws_each_and_keeps_a_seed_s_file_format_run():
    schedules = [schedule_for(seed, FORMATS) for seed in run_seeds(3, 300)]
    assert {s.table_format for s in schedules} == set(FORMATS)
    for schedule in schedules:
        if schedule.table_format == "parquet":  # the same run as in a soak of file-format tables alone
            assert schedule == schedule_for(schedule.seed)
            continue
        assert schedule.mode in FORMAT_MODES, "no swap: a format's replace is one commit"
        reachable = {*DRIVER_POINTS, *mode_points(schedule.table_format, schedule.mode), TASK_POINT, MID_WRITE, ""}
        assert {f.point for f in schedule.faults if f.kind != "clear"} <= reachable, schedule
        clears = {f.point for f in schedule.faults if f.kind == "clear"}
        assert clears <= set(clear_points(schedule.table_format, schedule.mode)), schedule
        assert schedule.mode == "create" or STALLED_BEGIN not in clears, "an existing table stages elsewhere"
        assert str(schedule).startswith(f"seed {schedule.seed}: {schedule.table_format} {schedule.mode}")
    assert {f.kind for s in schedules if s.table_format == "iceberg" for f in s.faults} == set(KINDS)
    for iceberg in ("iceberg", "iceberg-rest"):  # the fence's check, right before the commit, on either catalog
        assert "publish_checked" in {f.point for s in schedules if s.table_format == iceberg for f in s.faults}
    assert set(TABLE_FORMATS) == set(FORMATS) and set(TABLE_FORMATS.values()) == {"parquet", "iceberg", "delta"}
    assert schedule_for(5, ("delta",)).table_format == "delta"


def test_soak_formats_are_named_ones():
    assert formats_from("iceberg, delta,iceberg,iceberg-rest") == ("iceberg", "delta", "iceberg-rest")
    for text in ("", "hudi", "parquet,orc"):
        with pytest.raises(ValueError, match="soak formats are some of parquet, iceberg, delta"):
            formats_from(text)


def test_a_soak_on_s3_draws_the_store_s_outage_among_the_faults():
    schedules = [schedule_for(seed, storage="s3") for seed in run_seeds(2, 300)]
    assert {f.kind for s in schedules for f in s.faults} == set(KINDS) | set(S3_KINDS)
    for kind in S3_KINDS:
        outages = {f.point for s in schedules for f in s.faults if f.kind == kind}
        assert MID_WRITE in outages and "before_publish" in outages, kind
    assert all(str(s).startswith(f"seed {s.seed}: on s3 {s.mode}") for s in schedules)
    assert all(f.kind not in S3_KINDS for seed in run_seeds(2, 300) for f in schedule_for(seed).faults)
    with pytest.raises(ValueError, match="soak storage is one of local, s3"):
        schedule_for(1, storage="hdfs")
    with pytest.raises(ValueError, match="file-format tables only"):
        schedule_for(1, ("iceberg",), storage="s3")
