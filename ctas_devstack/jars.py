"""Local paths of jars pinned in ``scripts/jars.lock`` (fetched and verified by
``scripts/fetch_jars.py`` if missing), for the dev stack's services and the tests' Spark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FETCH_JARS = Path(__file__).resolve().parents[1] / "scripts" / "fetch_jars.py"


def locked_jars(*prefixes: str) -> list[str]:
    """The locked jars whose coordinates start with one of ``prefixes``."""
    done = subprocess.run(
        [sys.executable, str(FETCH_JARS), "--select", *prefixes], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().split(",")
