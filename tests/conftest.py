"""Test session setup.

Airflow reads its configuration when first imported, so the environment is fixed here, before any
test module imports it: a throw-away AIRFLOW_HOME (SQLite), a DAGs folder for generated test DAGs,
a SPARK_CONF_DIR, and a local Spark connection. Integration fixtures (metastore service, Airflow
database, reader SparkSession) start lazily, once per session, only when a test asks for them.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import hypothesis
import pytest

from tests.support.jvm import CONF_DIR

SESSION_ROOT = Path(tempfile.mkdtemp(prefix="ctas-tests-"))
# Shared by the controller and its xdist workers (they inherit the controller's environment).
_SHARED_MADE_HERE = "CTAS_TEST_SHARED" not in os.environ
if _SHARED_MADE_HERE:
    os.environ["CTAS_TEST_SHARED"] = tempfile.mkdtemp(prefix="ctas-tests-shared-")
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

# Property tests check logic, not speed: no per-example deadline, which a busy machine (CI beside
# another run) exceeds without anything being wrong.
hypothesis.settings.register_profile("ctas", deadline=None)
hypothesis.settings.load_profile("ctas")

from tests.support import test_times  # noqa: E402 (after the environment above: it imports no Airflow)

_GROUP = re.compile(r"""xdist_group\(\s*["']([\w.-]+)["']\s*\)""")


@functools.cache
def _module_group(path: str) -> str | None:
    """The ``xdist_group`` a test module's ``pytestmark`` names, read from its source."""
    try:
        found = _GROUP.search(Path(path).read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def pytest_xdist_make_scheduler(config, log):
    """xdist's ``loadgroup`` sends a group to one worker by appending its name to ``item._nodeid``,
    which pytest 9 no longer reads (a node's id is ``_id``): every group was split over both workers,
    each starting the group's module-scoped services (a YARN cluster, a reader JVM, a catalog
    server) once more. This scheduler keeps a module whose ``pytestmark`` names an ``xdist_group`` on
    one worker (modules naming the same group share it) and sends every other test on its own."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    root = config.rootpath

    class ModuleGroups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _module_group(str(root / nodeid.split("::", 1)[0])) or nodeid

    return ModuleGroups(config, log)


def pytest_collection_modifyitems(config, items):
    """Every test that starts no real process is a ``unit`` test (the fast gate runs them first).
    Longest first: slow tests, then the other integration tests, then unit tests. The scheduler
    (above) sends the module groups first, then one test at a time, so the workers end on short
    tests together instead of one finishing a multi-minute test alone."""
    for item in items:
        if item.get_closest_marker("integration") is None:
            item.add_marker("unit")
    items.sort(
        key=lambda item: (item.get_closest_marker("slow") is None, item.get_closest_marker("integration") is None)
    )


_DURATIONS: list[tuple[float, str, str]] = []
LANES = (
    "soak",
    "faults",
    "sequences",
    "formats",
    "scheduler",
    "yarn",
    "objectstore",
    "connect",
    "versions",
    "install",
    "bench",
)
"""The lanes of docs/contributing.md; an integration test in none of them is in the core lane."""
_LANE_SECONDS: dict[str, list[float]] = {}
_CPU: dict[str, float] = {}
_SECONDS: dict[str, float] = {}
"""Each test's setup, call and teardown, in seconds, by node id."""
_STARTED: list[float] = []
_MACHINE_CPU: list[tuple[float, float]] = []
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """CPU time of this process's tree: itself, every live descendant (the session's metastore,
    reader, servers), and what each of them and this process reaped (the drivers and tasks that
    ended). A test's share is the difference between two readings, services included."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:4])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:4])
        except psutil.Error:  # ended between the listing and the reading
            continue
    return total


def pytest_sessionstart(session):
    _STARTED.append(time.monotonic())
    _MACHINE_CPU.append(test_times.machine_cpu())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_CPU_AT_SETUP] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The CPU a test used, from its setup to the end of its teardown, rides on its teardown report
    (xdist sends a report's user_properties to the controller)."""
    outcome = yield
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        outcome.get_result().user_properties.append(("cpu_seconds", _cpu_seconds() - item.stash[_CPU_AT_SETUP]))


def pytest_runtest_logreport(report):
    """Each phase's duration, as the controller receives them from the workers, and each lane's sum."""
    if report.duration >= 0.5:
        _DURATIONS.append((report.duration, report.when, report.nodeid))
    cpu = dict(report.user_properties).get("cpu_seconds", 0.0)
    _CPU[report.nodeid] = _CPU.get(report.nodeid, 0.0) + cpu
    _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration
    keywords = set(report.keywords)
    lane = next((name for name in LANES if name in keywords), "core" if "integration" in keywords else "unit")
    entry = _LANE_SECONDS.setdefault(lane, [0.0, 0, 0.0])
    entry[0] += report.duration
    entry[1] += report.when == "call"
    entry[2] += cpu


def _selection(config) -> str:
    """What the run selected, for its report's history row: the marker expression, else the paths."""
    paths = [str(arg) for arg in config.invocation_params.args if Path(str(arg).split("::")[0]).exists()]
    return (config.option.markexpr or " ".join(paths) or "(all)").replace("|", "/")


_PASSED: list[bool] = []


def pytest_sessionfinish(session, exitstatus):
    """On the controller (or a run without workers): the run's durations and the fault matrix,
    under build/reports (artefacts of this run; ``scripts/publish_reports.sh`` updates docs/)."""
    _PASSED.append(exitstatus == 0)
    if hasattr(session.config, "workerinput"):
        return
    from tests.support.reliability import BUILD_REPORTS, write_report
    from tests.support.soak_report import write_report as write_soak_report

    BUILD_REPORTS.mkdir(parents=True, exist_ok=True)
    lanes = re.sub(r"\W+", "-", session.config.option.markexpr or "").strip("-") or "all"
    rows = [f"{seconds:9.1f}\t{when}\t{nodeid}" for seconds, when, nodeid in sorted(_DURATIONS, reverse=True)]
    (BUILD_REPORTS / f"durations-{lanes}.tsv").write_text(
        f"# {sum(d for d, _, _ in _DURATIONS):.0f} s of test time in phases of 0.5 s or more (all workers)\n"
        + "\n".join(rows)
        + "\n"
    )
    (BUILD_REPORTS / f"tests-{lanes}.tsv").write_text(
        "# test\tseconds (setup, call and teardown)\tCPU-seconds (its process tree's)\n"
        + "".join(f"{nodeid}\t{seconds:.1f}\t{_CPU.get(nodeid, 0.0):.1f}\n" for nodeid, seconds in
                  sorted(_SECONDS.items(), key=lambda item: -item[1]))
    )  # fmt: skip
    (BUILD_REPORTS / f"lanes-{lanes}.tsv").write_text(
        "# lane\ttests\tworker-seconds (setup, call and teardown of its tests)\tCPU-seconds\n"
        + "".join(
            f"{lane}\t{count:.0f}\t{seconds:.0f}\t{cpu:.0f}\n"
            for lane, (seconds, count, cpu) in sorted(_LANE_SECONDS.items())
        )
    )
    write_report(Path(os.environ["CTAS_TEST_SHARED"]))
    write_soak_report(Path(os.environ["CTAS_TEST_SHARED"]))
    test_times.write_report(
        selection=_selection(session.config),
        wall=time.monotonic() - _STARTED[0],
        lanes={
            lane: test_times.Lane(seconds, int(count), cpu) for lane, (seconds, count, cpu) in _LANE_SECONDS.items()
        },
        durations=_DURATIONS,
        cpu=_CPU,
        machine_busy=test_times.busy_share(_MACHINE_CPU[0], test_times.machine_cpu()),
    )


def pytest_unconfigure(config):
    """A passed session's files go: its services' state, and the scratch of every Spark JVM it
    started (``tests/support/fixtures.py``: killed drivers leave theirs, with a copy of each jar they
    were given; a CI run left ~1.6 GB in /tmp). A failed session's stay for the post-mortem."""
    if _PASSED and all(_PASSED):
        shutil.rmtree(SESSION_ROOT, ignore_errors=True)
        if _SHARED_MADE_HERE:
            shutil.rmtree(os.environ["CTAS_TEST_SHARED"], ignore_errors=True)
