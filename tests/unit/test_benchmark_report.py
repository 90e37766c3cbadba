"""The benchmark's report logic: ratios only ever compare runs of one session."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest

from ctas_devstack import reports
from tests.support.benchmarks import load

bench = load("ctas_benchmark")


def run(size: int, approach: str, wall: float, **extra: Any) -> dict[str, Any]:
    return {"size": size, "approach": approach, "wall_seconds": wall, "bytes": 100, "peak_rss_mb": 200.0,
            "spark_submits": 1, **extra}  # fmt: skip


def session(machine: str, date: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"machine": machine, "date": date, "repeats": 1, "runs": runs}


def test_an_approach_measured_in_two_sessions_or_apart_from_its_baseline_is_refused():
    first = session("m", "d1", [run(10**6, "plain", 10.0)])
    second = session("m", "d2", [run(10**6, "plain", 20.0)])
    with pytest.raises(SystemExit, match="plain at 1e6 is in two saved runs"):
        bench.merge([first, second])
    apart = session("m", "d2", [run(10**6, "atomic_create", 20.0)])
    with pytest.raises(SystemExit, match="atomic_create at 1e6 and its baseline are from two saved runs"):
        bench.merge([first, apart])


def test_other_approaches_of_the_same_size_merge_from_another_session():
    delta = session("m", "d1", [run(10**7, "delta_plain", 10.0), run(10**7, "delta_create", 11.0)])
    rest = session("m", "d2", [run(10**7, "iceberg_rest_plain", 20.0), run(10**7, "iceberg_rest_create", 21.0)])
    rows = {r["approach"]: r for r in bench.summarize(bench.merge([delta, rest]))}
    assert (rows["delta_create"]["ratio"], rows["delta_create"]["session"]) == (1.1, "d1")
    assert (rows["iceberg_rest_create"]["ratio"], rows["iceberg_rest_create"]["session"]) == (1.05, "d2")


def test_sessions_on_different_machines_name_their_machine():
    data = bench.merge(
        [session("fast", "d1", [run(10**6, "plain", 10.0)]), session("slow", "d2", [run(10**8, "plain", 90.0)])]
    )
    assert data["machine"] is None
    assert data["sessions"][0].startswith("d1 on fast, sizes 1e6")
    assert data["sessions"][1].startswith("d2 on slow, sizes 1e8")
    assert bench.merge([session("m", "d1", [run(10**6, "plain", 1.0)])])["machine"] == "m"


def test_ratio_is_to_the_plain_median_of_the_same_size():
    runs = [
        run(10**6, "plain", 10.0),
        run(10**6, "plain", 12.0),
        run(10**6, "atomic_create", 11.0, publish_seconds=0.4, publish_mechanism="rename"),
        run(10**7, "plain", 50.0),
        run(10**7, "atomic_create", 55.0, publish_seconds=0.5, publish_mechanism="rename", child_peak_rss_mb=900.0),
    ]
    rows = {(r["size"], r["approach"]): r for r in bench.summarize(bench.merge([session("m", "d", runs)]))}
    assert rows[(10**6, "atomic_create")]["ratio"] == pytest.approx(1.0)
    assert rows[(10**7, "atomic_create")]["ratio"] == pytest.approx(1.1)
    assert rows[(10**7, "atomic_create")]["publish"] == pytest.approx(0.5)
    assert rows[(10**7, "atomic_create")]["child_rss"] == pytest.approx(900.0)
    assert rows[(10**6, "atomic_create")]["child_rss"] is None  # runs from before it was recorded


def test_each_approach_is_divided_by_the_plain_ctas_of_its_own_shape_and_transport():
    runs = [
        run(10**6, "plain", 20.0),
        run(10**6, "plain_flat", 10.0),
        run(10**6, "atomic_replace_flip", 11.0),
        run(10**6, "atomic_replace_flip", 13.0),
        run(10**6, "atomic_replace_swap", 30.0),
        run(10**6, "connect_plain", 5.0),
        run(10**6, "connect_create", 6.0),
    ]
    rows = {r["approach"]: r for r in bench.summarize(bench.merge([session("m", "d", runs)]))}
    flip = rows["atomic_replace_flip"]
    assert (flip["ratio"], flip["ratio_min"], flip["ratio_max"]) == pytest.approx((1.2, 1.1, 1.3))
    assert flip["overhead"] == pytest.approx(2.0)
    assert rows["atomic_replace_swap"]["ratio"] == pytest.approx(1.5)
    assert rows["connect_create"]["ratio"] == pytest.approx(1.2)
    assert set(bench.BASELINE) == set(bench.APPROACHES)


def test_runs_of_one_round_are_paired_so_the_machine_s_drift_cancels():
    """The machine slows down by half between rounds: the median of medians sees an overhead the
    atomic runs never had; the pairs (each run over the baseline's run of its round) see 1.05."""
    runs = []
    for repeat, drift in enumerate((1.0, 1.0, 1.5, 1.5, 1.5)):
        runs.append(run(10**6, "plain_flat", 10.0 * drift, repeat=repeat))
        runs.append(run(10**6, "atomic_replace_flip", 10.5 * drift * (1.02 if repeat == 0 else 1.0), repeat=repeat))
    rows = {r["approach"]: r for r in bench.summarize(bench.merge([session("m", "d", runs)]))}
    flip = rows["atomic_replace_flip"]
    assert flip["pairs"] == 5
    assert (flip["ratio"], flip["ratio_min"], flip["ratio_max"]) == pytest.approx((1.05, 1.05, 1.071))
    assert rows["plain_flat"]["pairs"] == 0 and rows["plain_flat"]["ratio"] == pytest.approx(1.0)
    unpaired = [{k: v for k, v in r.items() if k != "repeat"} for r in runs]  # saved before rounds were kept
    old = {r["approach"]: r for r in bench.summarize(bench.merge([session("m", "d", unpaired)]))}
    assert old["atomic_replace_flip"]["pairs"] == 0
    assert old["atomic_replace_flip"]["ratio"] == pytest.approx(statistics.median(
        r["wall_seconds"] for r in unpaired if r["approach"] == "atomic_replace_flip") / 15.0)  # fmt: skip


def test_phase_breakdown_sets_prepare_against_the_baseline_statement():
    runs = [
        run(10**6, "plain", 20.0, phases={"statement": 8.0}),
        run(10**6, "atomic_create", 21.0, phases={"begin": 0.3, "prepare": 8.4, "commit": 0.5}),
    ]
    data = bench.merge([session("m", "2026-11-26T21:16:24Z", runs)])
    rows = bench.summarize(data)
    assert {r["approach"]: r["phases"] for r in rows}["atomic_create"] == {"begin": 0.3, "prepare": 8.4, "commit": 0.5}
    report = bench.render_report(data, rows, "plot.png")
    line = next(x for x in report.splitlines() if "mode=create" in x and "+1.20 s" in x)
    assert "0.30 s | 8.40 s | n/a | 0.50 s" in line  # no audit phase without checks


def test_every_run_keeps_its_session_so_lines_never_join_two_sessions():
    data = bench.merge([session("m", "d1", [run(10**6, "plain", 1.0)]), session("m", "d2", [run(10**7, "plain", 2.0)])])
    assert [r["session"] for r in data["runs"]] == ["d1", "d2"]
    assert {r["session"] for r in bench.summarize(data)} == {"d1", "d2"}


def test_rebuilding_a_table_is_also_set_against_the_plain_statement_that_rebuilds_it():
    runs = [
        run(10**6, "plain_flat", 10.0, phases={"statement": 5.0}),
        run(10**6, "plain_overwrite_flat", 11.0, phases={"statement": 5.6}),
        run(10**6, "atomic_replace_flip", 11.5, phases={"begin": 4.0, "prepare": 2.0, "commit": 0.9}),
        run(10**6, "atomic_create", 10.5, phases={"begin": 4.0, "prepare": 2.0, "commit": 0.9}),
    ]
    data = bench.merge([session("m", "2026-11-26T21:16:24Z", runs)])
    rows = {r["approach"]: r for r in bench.summarize(data)}
    flip = rows["atomic_replace_flip"]
    assert (flip["ratio"], flip["same_ratio"], flip["same_overhead"]) == pytest.approx((1.15, 11.5 / 11.0, 0.5))
    assert rows["atomic_create"]["same_ratio"] is None  # a new table: the plain CTAS is the same operation
    report = bench.render_report(data, bench.summarize(data), "plot.png")
    line = next(x for x in report.splitlines() if "flip" in x and "0.90 s" in x)
    assert line.endswith("| +1.90 s | +1.30 s |")  # 4.0 + 0.9 + 2.0 - 5.0, and - 5.6
    assert set(bench.SAME_OPERATION.values()) <= {a for a in bench.APPROACHES if bench.BASELINE[a] == a}


def test_the_atomic_work_and_the_same_operation_ratio_are_taken_round_by_round():
    """Three rounds on a drifting machine: the medians' difference pairs the plain statement's fast
    round with the atomic run's slow one and shows a cost no round has (the 1e8 run of issue 53)."""
    rounds = [(69.8, 67.3, 79.4, 80.0), (72.3, 72.2, 82.3, 86.2), (69.7, 74.7, 79.6, 88.7)]

    def phases(prepare: float) -> dict[str, float]:
        return {"begin": 3.0, "prepare": prepare, "commit": 1.0}

    runs = []
    for repeat, (statement, prepare, plain_wall, wall) in enumerate(rounds):
        runs += [
            run(10**8, "plain", 75.0, repeat=repeat, phases={"statement": 66.0}),
            run(10**8, "plain_overwrite", plain_wall, repeat=repeat, phases={"statement": statement}),
            run(10**8, "atomic_overwrite_partitions", wall, repeat=repeat, phases=phases(prepare)),
        ]
    data = bench.merge([session("m", "2026-12-01T04:10:30Z", runs)])
    row = next(r for r in bench.summarize(data) if r["approach"] == "atomic_overwrite_partitions")
    assert row["same_work"] == pytest.approx(3.0 + 1.0 - 0.1)  # per round: -2.5, -0.1, +5.0 over the prepare
    assert row["work"] == pytest.approx(3.0 + 1.0 + 72.2 - 66.0)
    assert row["same_ratio"] == pytest.approx(86.2 / 82.3)  # the median of 80.0/79.4, 86.2/82.3, 88.7/79.6
    medians_difference = 3.0 + 1.0 + 72.2 - 69.8
    assert row["same_work"] < medians_difference - 2
    line = next(x for x in bench.render_report(data, bench.summarize(data), None).splitlines()
                if "mode=overwrite_partitions" in x and "72.20 s" in x)  # fmt: skip
    assert line.endswith("| +10.20 s | +3.90 s |")


def test_the_history_row_gives_each_approachs_ratio_per_size_keyed_by_its_id():
    runs = [
        run(10**6, "plain", 10.0),
        run(10**6, "plain_flat", 10.0),
        run(10**6, "atomic_create", 10.5),
        run(10**6, "atomic_replace_flip", 9.8),
        run(10**7, "plain", 40.0),
        run(10**7, "atomic_create", 41.0),
        run(10**7, "atomic_replace_flip", 30.0),  # no unpartitioned baseline at this size
    ]
    saved = {**session("m", "2026-11-26T21:16:24.069193Z", runs), "repeats": 5, "commit": "ca32c99"}
    data = bench.merge([saved])
    assert bench.history_cells(data, bench.summarize(data)) == [
        "2026-11-26 21:16",
        "ca32c99",
        "1e6, 1e7 (5 repeats)",
        "1e6: atomic_create 1.050, atomic_replace_flip 0.980<br>1e7: atomic_create 1.025, atomic_replace_flip n/a",
    ]
    report = bench.render_report(data, bench.summarize(data), "benchmarks.png")
    assert reports.entry(report) == "| " + " | ".join(bench.history_cells(data, bench.summarize(data))) + " |"
    assert "![ratio and publish time vs size](benchmarks.png)" in report


def test_a_run_without_a_commit_or_a_plot_says_so():
    data = bench.merge([session("m", "2026-11-26T07:40:49Z", [run(10**6, "plain", 1.0)]) | {"metastore": "service"}])
    cells = bench.history_cells(data, bench.summarize(data))
    assert cells[1:] == ["unknown", "1e6 (1 repeats), metastore service", "-"]  # saved runs from before commits
    assert "![" not in bench.render_report(data, bench.summarize(data), None)


@pytest.fixture
def reports_in(tmp_path, monkeypatch):
    """build/reports/ and docs/ in a temporary directory (main() also drops SPARK_SUBMIT_OPTS: restored after)."""
    monkeypatch.setattr(reports, "BUILD_REPORTS", tmp_path / "build")
    monkeypatch.setattr(reports, "DOCS", tmp_path / "docs")
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    return tmp_path


def test_a_run_of_the_iceberg_and_delta_approaches_is_the_formats_report(reports_in):
    tmp_path = reports_in
    for name, approaches in (("formats", ("delta_plain", "delta_create")), ("benchmarks", ("plain", "atomic_create"))):
        saved = tmp_path / f"{name}.json"
        saved.write_text(json.dumps(session("m", "2026-11-26T05:09:14Z", [run(10**7, a, 10.0) for a in approaches])))
        assert bench.main(["--from-json", str(saved), "--no-plot"]) == 0
        written = (tmp_path / "build" / f"{name}.md").read_text()
        assert str(reports.entry(written)).endswith(f"| 1e7: {approaches[1]} 1.000 |")
    assert sorted(path.name for path in (tmp_path / "build").iterdir()) == ["benchmarks.md", "formats.md"]


def test_a_fresh_report_keeps_the_sections_the_published_one_has(reports_in):
    tmp_path = reports_in
    (tmp_path / "docs").mkdir()
    backfill = bench.BACKFILL_SECTION + "\nthe backfill table\n"
    (tmp_path / "docs" / "benchmarks.md").write_text("# Old run\n" + backfill + "\n## History\n\n| 2026-11-24 x |\n")
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(session("m", "2026-11-27T10:00:00Z", [run(10**6, "plain", 1.0)])))
    bench.main(["--from-json", str(saved), "--no-plot"])
    written = (tmp_path / "build" / "benchmarks.md").read_text()
    assert written.endswith(backfill) and "Old run" not in written and "## History" not in written
