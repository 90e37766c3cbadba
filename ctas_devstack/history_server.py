"""A Spark History Server from pyspark's own jars, on 127.0.0.1, reading one event-log directory.

    python -m ctas_devstack.history_server start --root .ctas-local/history --logs .ctas-local/spark-events
    python -m ctas_devstack.history_server stop --root .ctas-local/history

Applications that run with ``spark.eventLog.enabled=true`` and ``spark.eventLog.dir`` set to that
directory appear on it once they end (it rescans the directory every second); with
``spark.yarn.historyServer.address=127.0.0.1:<port>`` the operator's "Spark application" link points
at their page there.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ctas_devstack.metastore import free_port, spark_home, spawn, stop_pid_file

SERVER_CLASS = "org.apache.spark.deploy.history.HistoryServer"


class HistoryServer:
    def __init__(self, root: Path, logs: Path, port: int | None = None) -> None:
        self.root, self.logs = root.resolve(), logs.resolve()
        self.port = port or free_port()

    @property
    def address(self) -> str:
        """The value for ``spark.yarn.historyServer.address``."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.root / "history.pid"

    def start(self, timeout: float = 120) -> HistoryServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        options = {
            "spark.history.fs.logDirectory": self.logs.as_uri(),
            "spark.history.ui.port": str(self.port),
            "spark.history.fs.update.interval": "1s",
        }
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(spark_home()),
            "SPARK_HISTORY_OPTS": " ".join(f"-D{key}={value}" for key, value in options.items()),
        }
        command = [str(spark_home() / "bin" / "spark-class"), SERVER_CLASS]
        spawn(
            command, root=self.root, log_name="history.log", pid_file=self.pid_file, port=self.port, timeout=timeout,
            env=env,
        )  # fmt: skip
        return self

    def stop(self, grace: float = 10) -> None:
        stop_pid_file(self.pid_file, grace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/history"))
    parser.add_argument("--logs", type=Path, default=Path(".ctas-local/spark-events"))
    parser.add_argument("--port", type=int, default=18080)
    args = parser.parse_args(argv)
    server = HistoryServer(args.root, args.logs, args.port)
    if args.action == "stop":
        server.stop()
        return 0
    server.start()
    print(f"Spark History Server on http://{server.address} reading {server.logs.as_uri()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
