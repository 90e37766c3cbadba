"""A smoke run of the benchmark harness (the full benchmark is not part of CI): the flip over
spark-submit (a seed run, then the timed replace), tiny data, one repeat, so a broken harness shows
up here. One approach only: each run is a DAG run with its own JVM (~3 min with the baseline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.bench]

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_harness_runs_and_reports_phases(tmp_path):
    out = tmp_path / "benchmarks.md"
    approaches = ["atomic_replace_flip"]
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
    assert "| 1e3 | (b) AtomicCtasOperator, mode=replace, same shape (unpartitioned): flip" in report
