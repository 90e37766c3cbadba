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
        lanes={"faults": test_times.Lane(45.0, 1, 30.0), "core": test_times.Lane(2.0, 1, 10.0)},
        durations=durations,
        cpu={"tests/integration/test_a.py::test_slow": 30.0, "tests/integration/test_b.py::test_quick": 10.0},
        machine_busy=0.97,
        stamp="2026-11-27 22:00",
        commit="abc1234",
    )
    assert "| faults | 1 | 45 | 96% | 30 | 75% |" in text and "| core | 1 | 2 | 4% | 10 | 25% |" in text
    assert text.index("test_slow` | 45 | 30 |") < text.index("test_quick` | 2 | 10 |"), "longest first, phases summed"
    assert "40 CPU-seconds" in text and "97% busy" in text

    report, published = tmp_path / "test-times.md", tmp_path / "docs" / "test-times.md"
    report.write_text(text)
    assert reports.publish(reports.TEST_TIMES, report, published) == 1
    row = [line for line in published.read_text().splitlines() if line.startswith("| 2026")]
    assert row == ["| 2026-11-27 22:00 | abc1234 | not unit and not bench | 2 | 1.5 | faults 45, core 2 |"]


def test_machine_cpu_reads_busy_and_total_jiffies(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n")
    assert test_times.machine_cpu(stat) == (150.0, 1000.0)
    assert test_times.busy_share((150.0, 1000.0), (300.0, 1200.0)) == 0.75
    assert test_times.busy_share((1.0, 1.0), (1.0, 1.0)) is None
    assert test_times.machine_cpu(tmp_path / "missing") == (0.0, 0.0)
