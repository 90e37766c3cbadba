"""The A/B tool runs another revision's package, not this tree's, and reports each side apart."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.benchmarks import load

ab_phases = load("ab_phases")


def test_the_base_side_is_the_revisions_package(tmp_path: Path) -> None:
    base = ab_phases.export_package("HEAD", tmp_path)
    package = "airflow_provider_ctas/catalogs/analysis.py"
    committed = subprocess.run(
        ["git", "-C", str(ab_phases.REPO), "show", f"HEAD:{package}"], capture_output=True, text=True, check=True
    ).stdout
    assert (base / package).read_text() == committed
    assert sorted(p.name for p in base.iterdir()) == ["airflow_provider_ctas"]  # nothing else shadows the tree


def test_each_side_has_its_own_medians() -> None:
    runs = [
        {"side": "base", "round": 0, "wall": 20.0, "begin": 4.4, "commit": 0.8},
        {"side": "tree", "round": 0, "wall": 19.0, "begin": 4.1, "commit": 0.7},
        {"side": "base", "round": 1, "wall": 22.0, "begin": 4.6, "commit": 0.6},
        {"side": "tree", "round": 1, "wall": 21.0, "begin": 4.3, "commit": 0.9},
    ]
    assert ab_phases.report(runs, "c064094").splitlines()[2:] == [
        "| c064094 | 2 | 21.00 | 4.50 | 0.70 |",
        "| this tree | 2 | 20.00 | 4.20 | 0.80 |",
    ]
