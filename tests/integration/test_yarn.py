"""The dev stack's YARN (ctas_devstack/yarn.py), which cluster deploy mode is built and tested on
(issue 46): a PySpark application in cluster deploy mode runs its driver in a container, and what
the decision path of docs/design.md relies on holds: the worker learns where the driver runs and
what it printed from the ResourceManager and NodeManager alone, and a kill through the
ResourceManager ends the driver's container within a bounded time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctas_devstack.yarn import YarnCluster
from tests.support.jvm import classic_environ

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.yarn]

APP = """\
import socket, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("DRIVER", socket.getfqdn(), spark.conf.get("spark.submit.deployMode"), spark.range(10).count(), flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def yarn(tmp_path_factory) -> Iterator[YarnCluster]:
    cluster = YarnCluster(tmp_path_factory.mktemp("yarn"), memory_mb=3072, vcores=4).start()
    yield cluster
    cluster.stop()


def _wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = check()
        if seen:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout}s; last seen {seen!r}")


def test_a_cluster_mode_driver_is_found_read_and_killed_through_yarn_alone(yarn, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(APP)
    conf = [arg for key, value in yarn.spark_conf().items() for arg in ("--conf", f"{key}={value}")]
    env = {**classic_environ(), **yarn.env(), "SPARK_SUBMIT_OPTS": "", "PYSPARK_PYTHON": sys.executable}
    with open(tmp_path / "submit.log", "wb") as log:
        submit = subprocess.Popen(
            [str(Path(sys.executable).parent / "spark-submit"), "--master", "yarn", "--deploy-mode", "cluster",
             "--name", "ctas-yarn-probe", *conf, str(app)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        (app_id,) = _wait("the application is running", lambda: [
            a["id"] for a in yarn.apps() if a["name"] == "ctas-yarn-probe" and a["state"] == "RUNNING"
        ], timeout=180)  # fmt: skip
        printed = _wait("the driver's line in its container's stdout", lambda: [
            line for line in yarn.am_log(app_id).splitlines() if line.startswith("DRIVER ")
        ], timeout=120)  # fmt: skip
        assert printed[0].split()[2:] == ["cluster", "10"], printed
        assert yarn.app(app_id)["amRPCAddress"], "the driver's address, from the ResourceManager"

        killed_at = time.monotonic()
        yarn.kill(app_id)
        _wait("the application is killed", lambda: yarn.app(app_id)["state"] == "KILLED", timeout=60)
        assert submit.wait(timeout=120) != 0, "spark-submit reports the killed application as failed"
        gone = _wait("no container of the application runs", lambda: not _processes(app_id) or None, timeout=60)
        assert gone and time.monotonic() - killed_at < 60
    finally:
        if submit.poll() is None:
            os.killpg(submit.pid, 9)


def _processes(app_id: str) -> list[str]:
    listed = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if app_id in line and "ps -eo" not in line]
