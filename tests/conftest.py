"""Test session setup.

Airflow reads its configuration when first imported, so the environment is fixed here, before any
test module imports it: a throw-away AIRFLOW_HOME (SQLite), a DAGs folder for generated test DAGs,
a SPARK_CONF_DIR, and a local Spark connection. Integration fixtures (metastore service, Airflow
database, reader SparkSession) start lazily, once per session, only when a test asks for them.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path

from tests.support.jvm import CONF_DIR

SESSION_ROOT = Path(tempfile.mkdtemp(prefix="ctas-tests-"))
# Shared by the controller and its xdist workers (they inherit the controller's environment).
os.environ.setdefault("CTAS_TEST_SHARED", tempfile.mkdtemp(prefix="ctas-tests-shared-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(SESSION_ROOT / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(SESSION_ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # Empty, at a fixed path (tests/support/jvm.py): Spark's settings come as system properties.
        "SPARK_CONF_DIR": str(CONF_DIR),
        "SPARK_DRIVER_MEMORY": "768m",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        # Installed for the lineage tests, which enable it in their own processes.
        "AIRFLOW__OPENLINEAGE__DISABLED": "True",
    }
)
(SESSION_ROOT / "dags").mkdir(parents=True, exist_ok=True)

pytest_plugins = ["tests.support.fixtures"]


def pytest_collection_modifyitems(config, items):
    """Every test that starts no real process is a ``unit`` test (the fast gate runs them first).
    Longest first: slow tests, then the other integration tests, then unit tests. With xdist's
    ``load`` scheduling one test at a time, the two workers then end on short tests together instead
    of one finishing a multi-minute test alone (the longest take 2-7 minutes each)."""
    for item in items:
        if item.get_closest_marker("integration") is None:
            item.add_marker("unit")
    items.sort(
        key=lambda item: (item.get_closest_marker("slow") is None, item.get_closest_marker("integration") is None)
    )


_DURATIONS: list[tuple[float, str, str]] = []
LANES = ("faults", "sequences", "formats", "scheduler", "objectstore", "connect", "versions", "install", "bench")
"""The lanes of docs/contributing.md; an integration test in none of them is in the core lane."""
_LANE_SECONDS: dict[str, list[float]] = {}
_STARTED: list[float] = []


def pytest_sessionstart(session):
    _STARTED.append(time.monotonic())


def pytest_runtest_logreport(report):
    """Each phase's duration, as the controller receives them from the workers, and each lane's sum."""
    if report.duration >= 0.5:
        _DURATIONS.append((report.duration, report.when, report.nodeid))
    keywords = set(report.keywords)
    lane = next((name for name in LANES if name in keywords), "core" if "integration" in keywords else "unit")
    entry = _LANE_SECONDS.setdefault(lane, [0.0, 0])
    entry[0] += report.duration
    entry[1] += report.when == "call"


def _selection(config) -> str:
    """What the run selected, for its report's history row: the marker expression, else the paths."""
    paths = [str(arg) for arg in config.invocation_params.args if Path(str(arg).split("::")[0]).exists()]
    return (config.option.markexpr or " ".join(paths) or "(all)").replace("|", "/")


def pytest_sessionfinish(session, exitstatus):
    """On the controller (or a run without workers): the run's durations and the fault matrix,
    under build/reports (artefacts of this run; ``scripts/publish_reports.sh`` updates docs/)."""
    if hasattr(session.config, "workerinput"):
        return
    from tests.support import test_times
    from tests.support.reliability import BUILD_REPORTS, write_report

    BUILD_REPORTS.mkdir(parents=True, exist_ok=True)
    lanes = re.sub(r"\W+", "-", session.config.option.markexpr or "").strip("-") or "all"
    rows = [f"{seconds:9.1f}\t{when}\t{nodeid}" for seconds, when, nodeid in sorted(_DURATIONS, reverse=True)]
    (BUILD_REPORTS / f"durations-{lanes}.tsv").write_text(
        f"# {sum(d for d, _, _ in _DURATIONS):.0f} s of test time in phases of 0.5 s or more (all workers)\n"
        + "\n".join(rows)
        + "\n"
    )
    (BUILD_REPORTS / f"lanes-{lanes}.tsv").write_text(
        "# lane\ttests\tworker-seconds (setup, call and teardown of its tests)\n"
        + "".join(f"{lane}\t{count}\t{seconds:.0f}\n" for lane, (seconds, count) in sorted(_LANE_SECONDS.items()))
    )
    write_report(Path(os.environ["CTAS_TEST_SHARED"]))
    test_times.write_report(
        selection=_selection(session.config),
        wall=time.monotonic() - _STARTED[0],
        lanes={lane: (seconds, int(count)) for lane, (seconds, count) in _LANE_SECONDS.items()},
        durations=_DURATIONS,
    )
