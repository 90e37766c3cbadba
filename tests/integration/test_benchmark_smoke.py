"""A smoke run of the benchmark harness (the full benchmark is not part of CI): the flip over
spark-submit and the plain statement that rebuilds the same table (a seed run each, then the timed
runs), tiny data, one repeat, so a broken harness shows up here. Two approaches only: each run is a
DAG run with its own JVM (~4 min)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_harness_runs_and_reports_phases(tmp_path):
    out = tmp_path / "benchmarks.md"
    approaches = ["plain_overwrite_flat", "atomic_replace_flip"]
    command = [sys.executable, "benchmarks/ctas_benchmark.py", "--sizes", "1e3", "--repeats", "1", "--no-plot"]
    command += ["--approaches", *approaches, "--root", str(tmp_path / "bench"), "--out", str(out)]
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    report = out.read_text()
    runs = json.loads(report.split("```json", 1)[1].split("```", 1)[0])
    by_approach = {run["approach"]: run for run in runs}
    assert set(by_approach) == set(approaches)
    assert by_approach["atomic_replace_flip"]["publish_mechanism"] == "flip"
    assert set(by_approach["atomic_replace_flip"]["phases"]) >= {"begin", "prepare", "commit"}
    assert set(by_approach["plain_overwrite_flat"]["phases"]) == {"statement"}
    flip = next(line for line in report.splitlines() if line.startswith("| 1e3 | (b) AtomicCtasOperator, mode=replace"))
    assert "flip, the default" in flip
    same_operation = flip.split(" | ")[6]  # against the plain INSERT OVERWRITE, measured in this run
    assert same_operation != "n/a" and same_operation.endswith(" s)")
