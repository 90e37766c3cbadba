"""Cluster deploy mode on the dev stack's YARN, for the tests that put drivers there (test_yarn.py,
the soak's ``--cluster yarn``): the cluster in a network that cannot reach the task's host, the
``spark_yarn`` connection, and finding a try's application and its driver."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctas_devstack.netns import ClusterNetwork
from ctas_devstack.yarn import YarnCluster
from tests.support.jvm import container_archive

ENDED = ("FINISHED", "FAILED", "KILLED")
CONN_ID = "spark_yarn"


@contextlib.contextmanager
def yarn_cluster(root: Path, allow: tuple[int, ...]) -> Iterator[YarnCluster]:
    """A YARN in a network of its own: it reaches this host's ``allow`` ports (the metastore
    service's, a REST catalog's) and nothing else of it, as a cluster that cannot open a connection
    to the Airflow worker (``ctas_devstack/netns.py``)."""
    network = ClusterNetwork(root / "network.log", allow=allow).up()
    try:
        cluster = YarnCluster(root, memory_mb=6144, vcores=4, network=network).start()
        yield cluster
        cluster.stop()
    finally:
        network.down()


def use_yarn(yarn: YarnCluster, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The ``spark_yarn`` connection (cluster deploy mode, the ResourceManager's web address in its
    extra, as the apache-spark provider reads it) set for this test and the tries it starts; the conf
    a task on this cluster needs."""
    extra = {"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": yarn.web}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra}))
    for key, value in yarn.env().items():
        monkeypatch.setenv(key, value)
    return yarn.spark_conf(class_archive=container_archive())


def app_name(target: str, try_number: int) -> str:
    """A try's application name (``target`` qualified by its catalog, as the driver names it)."""
    return f"airflow-ctas {target} try {try_number}"


def application(yarn: YarnCluster, target: str, try_number: int) -> dict[str, Any]:
    """The latest application of a try on ``target`` (several runs publish to one table)."""
    name = app_name(target, try_number)
    return max((a for a in yarn.apps() if a["name"] == name), key=lambda a: int(a["startedTime"]))


def ended_application(yarn: YarnCluster, app_id: str) -> dict[str, Any] | None:
    """The application once it has ended, else None."""
    app = yarn.app(app_id)
    return app if app["state"] in ENDED else None


def processes(app_id: str) -> list[str]:
    """The command lines of this host's processes that belong to the application (its containers)."""
    # -ww: ps cuts lines at 80 columns when its output is not a terminal, where no app id shows.
    listed = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if app_id in line and "ps -ww" not in line]


def driver_pid(app_id: str) -> int | None:
    """The driver's JVM: the application master container of a cluster-mode application."""
    listed = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    for line in listed.splitlines():
        pid, _, args = line.strip().partition(" ")
        if app_id in args and "org.apache.spark.deploy.yarn.ApplicationMaster" in args and "bash" not in args[:30]:
            return int(pid)
    return None


def wait_for_applications_to_end(yarn: YarnCluster, target: str, timeout: float = 120) -> None:
    """Orphaned drivers (their task was killed) may still run in the cluster: wait until every
    application of a try on ``target`` has ended and none of its containers runs."""
    prefix = f"airflow-ctas {target} try "
    deadline = time.monotonic() + timeout
    while True:
        apps = [a for a in yarn.apps() if a["name"].startswith(prefix)]
        running = [a["id"] for a in apps if a["state"] not in ENDED or processes(a["id"])]
        if not running:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"applications of {target} still run after {timeout}s: {running}")
        time.sleep(0.5)
