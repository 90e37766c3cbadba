"""The command-line garbage collector, as a user runs it, and its JSON report."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.support.faults import REPO


def gc_cli(*args: str, airflow: bool = False) -> dict[str, Any]:
    """Run ``airflow-ctas-gc`` (its module), or ``airflow ctas gc`` with ``airflow``, with ``args``;
    return its JSON report."""
    command = ["-m", "airflow", "ctas", "gc"] if airflow else ["-m", "airflow_provider_ctas.gc"]
    process = subprocess.run(
        [sys.executable, *command, *args, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    report: dict[str, Any] = json.loads(process.stdout.strip().splitlines()[-1])
    return report


def entries(report: dict[str, Any], action: str) -> dict[str, str]:
    return {entry["what"]: entry["why"] for entry in report["entries"] if entry["action"] == action}
