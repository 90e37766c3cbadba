"""The test-times report: what a run measured, written under build/, published with a history row."""

from __future__ import annotations

from ctas_devstack import reports
from tests.support import test_times


def test_the_report_names_the_lanes_and_the_longest_tests_and_publishes_a_history_row(tmp_path):
    durations = [
        (40.0, "call", "tests/integration/test_a.py::test_slow"),
        (5.0, "setup", "tests/integration/test_a.py::test_slow"),
        (2.0, "call", "tests/integration/test_b.py::test_quick"),
    ]
    text = test_times.render(
        selection="not unit and not bench",
        wall=90.0,
        lanes={"faults": (45.0, 1), "core": (2.0, 1)},
        durations=durations,
        stamp="2026-11-27 22:00",
        commit="abc1234",
    )
    assert "| faults | 1 | 45 | 96% |" in text and "| core | 1 | 2 | 4% |" in text
    assert text.index("test_slow` | 45 |") < text.index("test_quick` | 2 |"), "longest first, phases summed"

    report, published = tmp_path / "test-times.md", tmp_path / "docs" / "test-times.md"
    report.write_text(text)
    assert reports.publish(reports.TEST_TIMES, report, published) == 1
    row = [line for line in published.read_text().splitlines() if line.startswith("| 2026")]
    assert row == ["| 2026-11-27 22:00 | abc1234 | not unit and not bench | 2 | 1.5 | faults 45, core 2 |"]
