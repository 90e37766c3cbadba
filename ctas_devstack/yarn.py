"""A real YARN on this machine for cluster deploy mode: Hadoop's MiniYARNCluster (a ResourceManager
and one NodeManager in one JVM, ``YarnCluster.java``) from pyspark's Hadoop 3.5.0 minicluster.

    python -m ctas_devstack.yarn start --root .ctas-local/yarn     # prints the HADOOP_CONF_DIR to use
    python -m ctas_devstack.yarn stop --root .ctas-local/yarn

Its jars are pinned in ``scripts/jars.lock`` and fetched in setup; Spark's own YARN support is in
pyspark's jars, which the containers use where they lie (``spark.yarn.jars=local:...``: nothing is
uploaded per application). Containers run as this user on this machine, so a driver in the cluster
sees the same filesystem, metastore service and S3 server as the task. The ResourceManager's ports
are its own choice; they are read back from the configuration the cluster writes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ctas_devstack.jars import locked_jars
from ctas_devstack.metastore import SERVICE_JVM_FLAGS, class_archive_options, hive_site, spark_home, stop_pid_file
from ctas_devstack.netns import ClusterNetwork

LAUNCHER = Path(__file__).with_name("YarnCluster.java")
CLUSTER_JARS = (
    "org.apache.hadoop:hadoop-client-minicluster:",
    "org.junit.jupiter:junit-jupiter-api:",
    "org.opentest4j:",
    "org.bouncycastle:",
)
"""Prefixes of the lock's coordinates on the cluster's classpath, before pyspark's jars."""


def cluster_classpath() -> str:
    return ":".join([*locked_jars(*CLUSTER_JARS), str(spark_home() / "jars" / "*")])


class YarnCluster:
    def __init__(
        self, root: Path, memory_mb: int = 6144, vcores: int = 8, network: ClusterNetwork | None = None
    ) -> None:
        """``network``: the cluster runs in a network of its own, which cannot reach this host
        (``netns.py``); its addresses are then the network's, in the configuration clients read."""
        self.root = root.resolve()
        self.memory_mb, self.vcores = memory_mb, vcores
        self.network = network
        self.conf_dir = self.root / "conf"
        """HADOOP_CONF_DIR for spark-submit: the cluster's yarn-site.xml and a local default FS."""

    @property
    def pid_file(self) -> Path:
        return self.root / "yarn.pid"

    @property
    def site(self) -> Path:
        return self.conf_dir / "yarn-site.xml"

    def start(self, timeout: float = 180) -> YarnCluster:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.site.unlink(missing_ok=True)
        (self.conf_dir / "core-site.xml").write_text(hive_site({"fs.defaultFS": "file:///"}))
        command = [
            *(self.network.prefix if self.network else []), "java", "-Xmx768m", *SERVICE_JVM_FLAGS,
            f"-Dtest.build.data={self.root / 'data'}", "-cp", cluster_classpath(), str(LAUNCHER),
            str(self.site), "ctas", str(self.memory_mb), str(self.vcores),
        ]  # fmt: skip
        with open(self.root / "yarn.log", "ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root
            )
        self.pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + timeout
        while not self.site.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.root / "yarn.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"YARN did not start (exit {process.poll()}): {tail}")
            time.sleep(0.5)
        if self.network is not None:  # its services bound "localhost" inside their network
            self.site.write_text(self.site.read_text().replace(">localhost:", f">{self.network.cluster_ip}:"))
        return self

    def stop(self, timeout: float = 60) -> None:
        """Kills the applications still running (a container outlives its NodeManager: each runs in its
        own session), waits for them to end, then stops the cluster. MiniYARNCluster's own stop hangs
        in Hadoop's shutdown hooks for their 30 s timeout; nothing of it is needed after this."""
        if self.pid_file.exists() and self.site.exists():
            deadline = time.monotonic() + timeout
            try:
                live = [a["id"] for a in self.apps() if a["state"] not in ("FINISHED", "FAILED", "KILLED")]
                for app_id in live:
                    self.kill(app_id)
                while live and time.monotonic() < deadline:
                    live = [i for i in live if self.app(i)["state"] not in ("FINISHED", "FAILED", "KILLED")]
                    time.sleep(0.5)
            except OSError:  # the ResourceManager is gone already
                pass
        stop_pid_file(self.pid_file, grace=2)

    def setting(self, name: str) -> str:
        for prop in ET.parse(self.site).getroot().iter("property"):  # noqa: S314 - written by our cluster
            if prop.findtext("name") == name:
                return prop.findtext("value") or ""
        raise KeyError(name)

    @property
    def web(self) -> str:
        return f"http://{self.setting('yarn.resourcemanager.webapp.address')}"

    def env(self) -> dict[str, str]:
        """What spark-submit needs in its environment to submit here."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def spark_conf(
        self, python: str = sys.executable, spark_jars: Path | None = None, class_archive: Path | None = None
    ) -> dict[str, str]:
        """Settings of an application on this cluster: Spark's jars where they lie (this pyspark's, or
        ``spark_jars`` of another release), this Python in the containers, one small executor, no
        second application attempt. The containers' JVMs get the small-service flags: with the default
        tiered compiler and G1 an application's driver and executor used 2.2 times the CPU.

        ``class_archive``: a class-data-sharing archive of those jars' classes for the containers'
        JVMs (the tests make one: ``tests/support/jvm.py``). A JVM uses an archive only when its
        class path begins with the entries the archive was made with, and a container's begins with
        its own directory: the jars are then put first (``spark.*.extraClassPath``, which Spark
        places before it)."""
        jars = spark_jars or spark_home() / "jars"
        archive = class_archive_options(class_archive) if class_archive else []
        flags = " ".join([*SERVICE_JVM_FLAGS, *archive])
        first = {f"spark.{side}.extraClassPath": f"{jars}/*" for side in ("driver", "executor")} if archive else {}
        return {
            "spark.driver.extraJavaOptions": flags,
            "spark.executor.extraJavaOptions": flags,
            **first,
            "spark.yarn.jars": f"local:{jars}/*",
            "spark.yarn.appMasterEnv.PYSPARK_PYTHON": python,
            "spark.executorEnv.PYSPARK_PYTHON": python,
            "spark.yarn.maxAppAttempts": "1",
            "spark.driver.memory": "512m",
            "spark.executor.memory": "512m",
            "spark.executor.instances": "1",
            **(self._own_network_conf() if self.network else {}),
        }

    def _own_network_conf(self) -> dict[str, str]:
        """A driver and its executors name themselves by the network's address (this machine's name
        means another address outside it)."""
        assert self.network is not None
        address = self.network.cluster_ip
        return {
            f"spark.{side}.{name}": address
            for side in ("yarn.appMasterEnv", "executorEnv")
            for name in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")
        }

    def _get(self, url: str) -> Any:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - http://, from the cluster's site
            return json.loads(response.read())

    def apps(self) -> list[dict[str, Any]]:
        apps = self._get(f"{self.web}/ws/v1/cluster/apps")["apps"]
        return list(apps["app"]) if apps else []

    def app(self, app_id: str) -> dict[str, Any]:
        return dict(self._get(f"{self.web}/ws/v1/cluster/apps/{app_id}")["app"])

    def kill(self, app_id: str) -> None:
        """What ``yarn application -kill`` does, through the ResourceManager's REST API."""
        request = urllib.request.Request(  # noqa: S310 - http://, from the cluster's site
            f"{self.web}/ws/v1/cluster/apps/{app_id}/state",
            data=json.dumps({"state": "KILLED"}).encode(),
            headers={"Content-Type": "application/json"},
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=30):  # noqa: S310 - as above
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/yarn"))
    args = parser.parse_args(argv)
    cluster = YarnCluster(args.root)
    if args.action == "stop":
        cluster.stop()
        return 0
    cluster.start()
    print(f"YARN at {cluster.web}; HADOOP_CONF_DIR={cluster.conf_dir}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
