"""A Spark standalone cluster (one master, N workers) from pyspark's own ``spark-class``, on 127.0.0.1.

The "outgrew one machine" path for trying the provider with a ``spark://`` connection:

    python -m ctas_devstack.cluster start --root .ctas-local/cluster --port 7077
    python -m ctas_devstack.cluster stop --root .ctas-local/cluster

Spark runs Python applications on a standalone cluster in client deploy mode only (spark-submit:
"Cluster deploy mode is currently not supported for python applications on standalone clusters").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from ctas_devstack.metastore import SERVICE_JVM_FLAGS, free_port, spark_home, stop_pid_files, wait_for_port


class StandaloneCluster:
    def __init__(
        self, root: Path, port: int | None = None, workers: int = 1, cores: int = 2, memory: str = "2g"
    ) -> None:
        self.root = root.resolve()
        self.port = port or free_port()
        self.web_port = free_port()
        self.workers = workers
        self.cores = cores
        self.memory = memory

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        # The master and worker are small services: SERVICE_JVM_FLAGS (ctas_devstack/metastore.py).
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(spark_home()),
            "SPARK_DAEMON_JAVA_OPTS": " ".join(SERVICE_JVM_FLAGS),
        }
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child process
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=self.root,
        )
        (self.root / f"{name}.pid").write_text(str(process.pid))
        return process

    def start(self, timeout: float = 120) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--webui-port", str(self.web_port),
        )  # fmt: skip
        wait_for_port(self.port, timeout, master)
        wait_for_port(self.web_port, timeout, master)
        for index in range(self.workers):
            self._start(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host", "127.0.0.1",
                "--cores", str(self.cores),
                "--memory", self.memory,
                "--webui-port", str(free_port()),
                "--work-dir", str(self.root / f"work-{index}"),
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while self._alive_workers() < self.workers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.workers} worker(s) did not register with {self.master_url}")
            time.sleep(0.5)
        (self.root / "cluster.json").write_text(json.dumps({"master": self.master_url, "web_port": self.web_port}))
        return self

    def state(self) -> dict[str, Any]:
        """The master's JSON status page: workers, active and completed applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=10) as response:
            return dict(json.load(response))

    def _alive_workers(self) -> int:
        """0 while the master's status page is not serving yet (its port opens before its handlers)."""
        try:
            return int(self.state().get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def stop(self, grace: float = 10) -> None:
        stop_pid_files([*sorted(self.root.glob("worker-*.pid")), self.root / "master.pid"], grace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/cluster"))
    parser.add_argument("--port", type=int, default=7077)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--memory", default="2g")
    args = parser.parse_args(argv)
    cluster = StandaloneCluster(args.root, args.port, args.workers, args.cores, args.memory)
    if args.action == "stop":
        cluster.stop()
        return 0
    cluster.start()
    print(f"Spark standalone master {cluster.master_url} (web UI http://127.0.0.1:{cluster.web_port})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
