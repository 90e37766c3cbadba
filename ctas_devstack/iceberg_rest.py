"""The Iceberg project's own REST catalog server (``RESTCatalogServer`` from iceberg-open-api's test
fixtures), on this machine, its catalog in a SQLite file and its warehouse a local directory.

    python -m ctas_devstack.iceberg_rest start --root .ctas-local/iceberg-rest --port 8181
    python -m ctas_devstack.iceberg_rest stop --root .ctas-local/iceberg-rest

Its jars are pinned in ``scripts/jars.lock`` and fetched in setup; Hadoop is pyspark's own client.
State lives under ``root``, so a restarted server serves the same tables (the tests stop and start it
to make the catalog unavailable). A Spark session reaches it with ``conf(name)``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ctas_devstack.jars import locked_jars
from ctas_devstack.metastore import SERVICE_JVM_FLAGS, free_port, spark_home, spawn, stop_pid_file

SERVER_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
SERVER_JARS = (
    "org.apache.iceberg:iceberg-core:",
    "org.apache.iceberg:iceberg-api:",
    "org.apache.iceberg:iceberg-common:",
    "org.apache.iceberg:iceberg-bundled-guava:",
    "org.apache.iceberg:iceberg-open-api:",
    "org.eclipse.jetty",
    "jakarta.servlet:",
    "com.fasterxml.jackson.core:",
    "com.github.ben-manes.caffeine:",
    "com.google.errorprone:",
    "commons-codec:",
    "commons-io:",
    "io.airlift:",
    "org.apache.avro:",
    "org.apache.commons:",
    "org.apache.httpcomponents.",
    "org.checkerframework:",
    "org.roaringbitmap:",
    "org.slf4j:",
    "org.xerial:",
)
"""Prefixes of the lock's coordinates that make up the server's classpath."""


def server_classpath() -> list[str]:
    hadoop = sorted(str(path) for path in (spark_home() / "jars").glob("hadoop-client-*.jar"))
    return [*locked_jars(*SERVER_JARS), *hadoop]


class IcebergRestCatalog:
    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root.resolve()
        self.port = port or free_port()
        self.warehouse = self.root / "warehouse"

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.root / "iceberg-rest.pid"

    def conf(self, name: str) -> dict[str, str]:
        """What a Spark session sets for a catalog ``name`` on this server (the Iceberg runtime jar
        itself is the caller's)."""
        prefix = f"spark.sql.catalog.{name}"
        return {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "rest", f"{prefix}.uri": self.uri}

    def start(self, timeout: float = 60) -> IcebergRestCatalog:
        self.root.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(exist_ok=True)
        env = {
            **os.environ,
            # RESTCatalogServer turns CATALOG_* variables into catalog properties ("_" is ".").
            # A SQLite writer locks the file: readers wait for it (up to 10 s) instead of failing,
            # as a production catalog's database serves reads beside a commit.
            "CATALOG_URI": f"jdbc:sqlite:{self.root / 'catalog.db'}?busy_timeout=10000",
            "CATALOG_WAREHOUSE": self.warehouse.as_uri(),
            "CATALOG_REST_PORT": str(self.port),
            "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        }
        command = ["java", "-Xmx256m", *SERVICE_JVM_FLAGS, "-cp", ":".join(server_classpath()), SERVER_CLASS]
        spawn(
            command, root=self.root, log_name="iceberg-rest.log", pid_file=self.pid_file, port=self.port,
            timeout=timeout, env=env,
        )  # fmt: skip
        return self

    def stop(self, grace: float = 10) -> None:
        stop_pid_file(self.pid_file, grace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/iceberg-rest"))
    parser.add_argument("--port", type=int, default=8181)
    args = parser.parse_args(argv)
    server = IcebergRestCatalog(args.root, args.port)
    if args.action == "stop":
        server.stop()
        return 0
    server.start()
    print(f"Iceberg REST catalog on {server.uri}, warehouse {server.warehouse.as_uri()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
