"""Two reports' phases side by side: each run is set against its own session's plain CTAS only, and
the section lands in one place in the report, whichever script re-renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.benchmarks import load

compared = load("phases_compared")
bench = load("ctas_benchmark")


def run(session: str, approach: str, wall: float, phases: dict[str, float]) -> dict[str, Any]:
    return {"session": session, "size": 10**6, "approach": approach, "wall_seconds": wall, "bytes": 1,
            "peak_rss_mb": 1.0, "spark_submits": 1, "phases": phases}  # fmt: skip


def report(tmp_path: Path, name: str, runs: list[dict[str, Any]], tail: str = "") -> Path:
    path = tmp_path / name
    path.write_text(f"# Benchmarks\n\nRaw runs:\n\n```json\n{json.dumps(runs)}\n```\n{tail}")
    return path


def test_each_side_is_set_against_its_own_sessions_plain_statement(tmp_path: Path) -> None:
    before = report(tmp_path, "before.md", [
        run("d1", "plain_flat", 20.0, {"statement": 9.0}),
        run("d1", "atomic_replace_flip", 22.0, {"begin": 5.0, "prepare": 5.0, "commit": 1.5}),
    ])  # fmt: skip
    after = report(tmp_path, "after.md", [
        run("d2", "plain_flat", 30.0, {"statement": 12.0}),  # a slower machine
        run("d2", "atomic_replace_flip", 30.6, {"begin": 4.5, "prepare": 8.0, "commit": 0.8}),
        run("d2", "atomic_create", 31.0, {"begin": 4.0, "prepare": 8.0, "commit": 0.7}),  # only after: left out
    ])  # fmt: skip
    section = compared.render(compared.saved_runs(before), compared.saved_runs(after), ("before.md", "after.md"))
    rows = [line for line in section.splitlines() if line.startswith("| 1e6")]
    assert len(rows) == 1
    assert rows[0].split(" | ")[2:] == [
        "5.00 → 4.50",
        "1.50 → 0.80",
        "-4.00 → -4.00",
        "+2.50 → +1.30",
        "1.100 → 1.020 |",
    ]
    assert "run d1" in section and "run d2" in section


def test_reports_without_an_atomic_approach_in_common_are_refused(tmp_path: Path) -> None:
    before = report(tmp_path, "b.md", [run("d1", "plain", 1.0, {"statement": 0.5})])
    with pytest.raises(SystemExit, match="in common"):
        compared.render(compared.saved_runs(before), compared.saved_runs(before), ("b", "b"))


def test_the_section_replaces_an_earlier_one_before_the_backfill_section() -> None:
    backfill = bench.BACKFILL_SECTION + "\nbackfill table\n"
    first = compared.insert_section("main report\n" + backfill, compared.SECTION + "\nold\n")
    second = compared.insert_section(first, compared.SECTION + "\nnew\n")
    assert second == "main report\n" + compared.SECTION + "\nnew\n" + backfill
    assert compared.insert_section("main report\n", compared.SECTION + "\nnew\n") == (
        "main report\n" + compared.SECTION + "\nnew\n"
    )
    assert compared.insert_section("", compared.SECTION + "\nnew\n") == compared.SECTION.lstrip("\n") + "\nnew\n"


def test_a_rerun_of_the_harness_keeps_both_added_sections() -> None:
    added = bench.PHASES_COMPARED_SECTION + "\nphases\n" + bench.BACKFILL_SECTION + "\nbackfill\n"
    assert bench.other_sections("generated report\n" + added) == added
    assert bench.other_sections("generated report\n") == ""


def test_an_approach_without_a_prepare_phase_shows_no_atomic_work(tmp_path: Path) -> None:
    runs = [
        run("d1", "delta_plain_rtas", 20.0, {"statement": 9.0}),
        run("d1", "delta_replace", 21.0, {"begin": 1.0, "commit": 10.0}),  # Delta writes at commit
    ]
    row = compared.phase_rows(compared.saved_runs(report(tmp_path, "d.md", runs)))[(10**6, "delta_replace")]
    assert (row["extra_prepare"], row["work"], row["ratio"]) == (None, None, pytest.approx(1.05))


def test_without_a_report_under_build_the_section_goes_into_the_published_body(tmp_path, monkeypatch) -> None:
    from ctas_devstack import reports

    monkeypatch.setattr(reports, "BUILD_REPORTS", tmp_path / "build")
    monkeypatch.setattr(reports, "DOCS", tmp_path / "docs")
    (tmp_path / "docs").mkdir()
    published = "# Published run\n" + bench.BACKFILL_SECTION + "\nbackfill\n\n## History\n\n| 2026-11-24 11:22 | x |\n"
    (tmp_path / "docs" / "benchmarks.md").write_text(published)
    runs = [
        run("d1", "plain_flat", 20.0, {"statement": 9.0}),
        run("d1", "atomic_replace_flip", 22.0, {"begin": 5.0, "prepare": 5.0, "commit": 1.5}),
    ]
    before, after = report(tmp_path, "before.md", runs), report(tmp_path, "after.md", runs)
    assert compared.main([str(before), str(after)]) == 0
    written = (tmp_path / "build" / "benchmarks.md").read_text()
    assert written.startswith("# Published run\n" + compared.SECTION)
    assert written.endswith(bench.BACKFILL_SECTION + "\nbackfill\n")  # no history: publishing adds it back
    assert reports.entry(written) is None  # no new run: publishing adds no row
