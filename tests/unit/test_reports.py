"""A generated report and its history: a run's report carries its history row as a marker; publishing
copies the report into docs/ and keeps every earlier row of its history table."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctas_devstack import reports

KIND = reports.BENCHMARKS


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """build/reports/ and docs/ under a temporary directory."""
    monkeypatch.setattr(reports, "BUILD_REPORTS", tmp_path / "build" / "reports")
    monkeypatch.setattr(reports, "DOCS", tmp_path / "docs")
    reports.BUILD_REPORTS.mkdir(parents=True)
    reports.DOCS.mkdir()
    return tmp_path


def report(body: str, cells: list[str] | None) -> str:
    return body + ("" if cells is None else "\n" + reports.marker(KIND, cells) + "\n")


def history_rows(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("| 20")]


def test_a_marker_has_one_cell_per_column_and_no_table_syntax():
    cells = ["2026-11-27 10:00", "abc1234+changes", "1e6 (3 repeats)", "1e6: atomic_create 1.010"]
    line = reports.marker(KIND, cells)
    assert reports.entry("text\n" + line + "\n") == "| " + " | ".join(cells) + " |"
    assert reports.entry("no marker here") is None
    with pytest.raises(ValueError, match="4 columns"):
        reports.marker(KIND, cells[:3])
    for bad in ("a | b", "a --> b", "two\nlines", " "):
        with pytest.raises(ValueError, match="not a history cell"):
            reports.marker(KIND, [*cells[:3], bad])


def test_a_run_is_stamped_in_utc_to_the_minute():
    assert reports.stamp("2026-11-26T21:16:24.069193Z") == "2026-11-26 21:16"
    assert reports.stamp("2026-11-26T23:16:24+02:00") == "2026-11-26 21:16"
    assert len(reports.stamp()) == len("2026-11-26 21:16")


def test_publishing_twice_keeps_both_rows_and_the_latest_body(tree: Path):
    first = ["2026-11-26 10:00", "aaa1111", "1e6 (3 repeats)", "1e6: atomic_create 1.020"]
    second = ["2026-11-27 10:00", "bbb2222", "1e6 (5 repeats)", "1e6: atomic_create 0.990"]
    KIND.report.write_text(report("# First run\n", first))
    assert reports.publish(KIND) == 1
    KIND.report.write_text(report("# Second run\n", second))
    assert reports.publish(KIND) == 2

    published = KIND.published.read_text()
    assert published.startswith("# Second run\n\n## History\n")
    assert "First run" not in published and "<!-- history" not in published
    assert history_rows(KIND.published) == ["| " + " | ".join(cells) + " |" for cells in (first, second)]
    assert "| run (UTC) | commit | sizes (repeats) | median wall / baseline |" in published


def test_a_report_without_a_marker_adds_no_row(tree: Path):
    old_row = "| 2026-11-20 09:00 | ccc3333 | 1e7 (7 repeats) | 1e7: atomic_create 1.005 |"
    KIND.published.write_text(f"# Old\n\n## History\n\nnote\n\n| a | b | c | d |\n|---|---|---|---|\n{old_row}\n")
    KIND.report.write_text("# A section added, no new run\n")
    assert reports.publish(KIND) == 1
    assert history_rows(KIND.published) == [
        "| 2026-11-20 09:00 | ccc3333 | 1e7 (7 repeats) | 1e7: atomic_create 1.005 |"
    ]
    assert KIND.published.read_text().startswith("# A section added, no new run\n\n## History\n")


def test_publishing_the_same_report_again_adds_no_second_row(tree: Path):
    KIND.report.write_text(report("# Run\n", ["2026-11-26 10:00", "aaa1111", "1e6 (3 repeats)", "-"]))
    reports.publish(KIND)
    assert reports.publish(KIND) == 1


def test_the_plot_a_report_links_is_published_beside_it(tree: Path):
    KIND.report.write_text(report("# Run\n\n![plot](benchmarks.png)\n", None))
    KIND.report.with_suffix(".png").write_bytes(b"new plot")
    reports.publish(KIND)
    assert (reports.DOCS / "benchmarks.png").read_bytes() == b"new plot"


def test_publish_all_publishes_the_reports_that_exist_and_fails_without_any(tree: Path, capsys):
    assert reports.main() == 1
    assert "no report under" in capsys.readouterr().err
    reports.FORMATS.report.write_text("# Formats\n" + reports.marker(reports.FORMATS, ["2026-11-26 05:09", "3b94c19",
                                      "1e7 (5 repeats)", "1e7: delta_create 1.030"]) + "\n")  # fmt: skip
    reports.PROFILE.report.write_text("# Profile\n")
    assert reports.main() == 0
    assert history_rows(reports.DOCS / "formats.md") == [
        "| 2026-11-26 05:09 | 3b94c19 | 1e7 (5 repeats) | 1e7: delta_create 1.030 |"
    ]
    assert (reports.DOCS / "profile.md").exists()
    assert not (reports.DOCS / "benchmarks.md").exists() and not (reports.DOCS / "reliability.md").exists()


def test_a_report_not_written_yet_starts_from_the_published_body(tree: Path):
    assert reports.current(KIND.report) == ""
    KIND.published.write_text("# Published\n\nbody\n\n## History\n\nnote\n\n| 2026-11-20 09:00 | c | d | e |\n")
    assert reports.current(KIND.report) == "# Published\n\nbody\n"
    assert reports.current(tree / "elsewhere" / "benchmarks.md") == ""  # only a report under build/reports/
    KIND.report.write_text("# Built\n")
    assert reports.current(KIND.report) == "# Built\n"


def test_the_published_reports_parse_as_their_kinds():
    """docs/ holds one report per kind, each with a history table of well-formed rows."""
    for kind in reports.KINDS:
        text = kind.published.read_text()
        assert "<!-- history" not in text, kind.name
        rows = reports.rows(text)
        assert rows, kind.name
        assert all(row.count(" | ") == len(kind.columns) - 1 for row in rows), kind.name
