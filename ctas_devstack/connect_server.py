"""A Spark Connect server from pyspark's own jars, on 127.0.0.1, for ``spark_connect`` connections.

    python -m ctas_devstack.connect_server start --root .ctas-local/connect --port 15002
    python -m ctas_devstack.connect_server stop --root .ctas-local/connect

The server is one Spark driver (``local[N]`` by default, or any master) that reads its catalog
settings from ``SPARK_CONF_DIR`` like any other Spark application; point that at a directory
written by ``ctas_devstack.metastore`` to share a metastore with other Spark jobs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ctas_devstack.metastore import free_port, spark_home, spawn, stop_pid_file

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    """With ``token``, clients must present it (Spark's pre-shared key check); it reaches the server
    through its environment, never its command line, and a client sends it to ``localhost`` only
    (pyspark sends a token in clear text to no other host)."""

    def __init__(
        self,
        root: Path,
        port: int | None = None,
        master: str = "local[2]",
        conf: dict[str, str] | None = None,
        token: str | None = None,
        home: Path | None = None,
    ) -> None:
        """``home``: the Spark to run (a pyspark package directory; this environment's by default)."""
        self.home = home or spark_home()
        self.root = root.resolve()
        self.port = port or free_port()
        self.master = master
        self.conf = dict(conf or {})
        self.token = token

    @property
    def host(self) -> str:
        return "localhost" if self.token else "127.0.0.1"

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.root / "connect.pid"

    def command(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            **self.conf,
        }
        options = [item for key, value in conf.items() for item in ("--conf", f"{key}={value}")]
        return [
            str(self.home / "bin" / "spark-submit"),
            "--master", self.master,
            "--class", SERVER_CLASS,
            "--name", "airflow-ctas-connect-server",
            *options,
            "spark-internal",
        ]  # fmt: skip

    def start(self, timeout: float = 180) -> ConnectServer:
        self.root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(self.home)}
        if self.token:
            env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = self.token
        spawn(
            self.command(), root=self.root, log_name="connect.log", pid_file=self.pid_file, port=self.port,
            timeout=timeout, env=env,
        )  # fmt: skip
        return self

    def stop(self, grace: float = 10) -> None:
        stop_pid_file(self.pid_file, grace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/connect"))
    parser.add_argument("--port", type=int, default=15002)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    server = ConnectServer(args.root, args.port, args.master)
    if args.action == "stop":
        server.stop()
        return 0
    server.start()
    print(f"Spark Connect server at {server.url} (log {server.root / 'connect.log'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
