"""The fault matrix report: written under build/ by a run, copied into docs/ only on purpose, with
a history row per published run."""

from __future__ import annotations

import json

from tests.support import reliability


def _cell(shared, name: str, ok: bool) -> None:
    (shared / "matrix").mkdir(parents=True, exist_ok=True)
    cell = {"order": 0, "fault": "f", "when": "w", "mode": "create", "try1": "failed", "left1": [], "try2": "ok",
            "left2": [], "seen": "400", "rows": 400, "ok": ok, "seconds": 1, "problem": None}  # fmt: skip
    (shared / "matrix" / f"{name}.json").write_text(json.dumps(cell))


def test_a_run_writes_under_build_and_publishing_keeps_the_history(tmp_path, monkeypatch):
    monkeypatch.setattr(reliability, "REPORT", tmp_path / "build" / "reliability.md")
    monkeypatch.setattr(reliability, "PUBLISHED", tmp_path / "docs" / "reliability.md")
    (tmp_path / "docs").mkdir()
    reliability.PUBLISHED.write_text("OLD REPORT BODY\n\n## History\n\n| 2026-11-20 10:00 | abc1234 | 28 | 35 | 0 |\n")
    _cell(tmp_path / "shared", "a", ok=True)
    _cell(tmp_path / "shared", "b", ok=False)
    reliability.write_report(tmp_path / "shared")
    assert "FAIL" in reliability.REPORT.read_text()
    assert "OLD REPORT BODY" in reliability.PUBLISHED.read_text()  # a run does not touch docs/

    reliability.publish()
    published = reliability.PUBLISHED.read_text()
    rows = [line for line in published.splitlines() if line.startswith("| 20")]
    assert rows[0] == "| 2026-11-20 10:00 | abc1234 | 28 | 35 | 0 |"
    assert rows[1].endswith("| 2 | 1 | 1 |") and len(rows) == 2
    assert "<!-- history" not in published and "OLD REPORT BODY" not in published
