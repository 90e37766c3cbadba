"""A Hive Metastore thrift service run from pyspark's own jars, for a realistic local setup.

Spark's embedded Derby metastore admits one JVM at a time, so anything concurrent (a reader
polling while a task writes, parallel backfill runs) needs a shared metastore service. This runs
``org.apache.hadoop.hive.metastore.HiveMetaStore`` from the Hive 2.3 jars inside the pyspark
wheel, bound to 127.0.0.1, backed by an embedded Derby database under ``root``, or with
``--postgres-database`` by a database on the local PostgreSQL server (``scripts/postgres.sh``), as
production metastores are: Derby reads a row at a time under locks, so a reader can see one
``alter_partitions`` half committed; PostgreSQL reads each statement from one snapshot.

    python -m ctas_devstack.metastore start --root .ctas-local/hms --port 9083
    python -m ctas_devstack.metastore stop --root .ctas-local/hms

With ``--s3-endpoint`` (a ``python -m ctas_devstack.s3`` server) the service gets the S3A jars and
settings it needs to create, move and delete tables' directories on ``s3a://``, and the Spark conf
written with ``--spark-conf-dir`` gets them too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def spawn(
    command: list[str], *, root: Path, log_name: str, pid_file: Path, port: int, timeout: float,
    env: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """Starts a service in its own session under ``root`` (output appended to ``log_name``), records
    its pid for ``stop_pid_file`` and returns once it listens on ``port``."""
    log = open(root / log_name, "ab")  # noqa: SIM115 - handed to the child process
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=root)
    pid_file.write_text(str(process.pid))
    wait_for_port(port, timeout, process)


# A small service: one compiler tier and one GC thread (with the default tiered compiler and G1, a
# test session's metastore spent about three times the CPU on each request in its first minutes).
SERVICE_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def class_archive_options(archive: Path) -> list[str]:
    """A JVM's options to start from a class-data-sharing archive, silently without it when its
    class path does not match the archive's (``-Xshare:auto``, its CDS warnings off)."""
    return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def hive_site(properties: dict[str, str]) -> str:
    body = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>" for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}\n</configuration>\n'


def write_spark_conf_dir(directory: Path, conf: dict[str, str]) -> Path:
    """Write ``spark-defaults.conf``; point SPARK_CONF_DIR at the directory to use it."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"{key} {value}" for key, value in sorted(conf.items())]
    (directory / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
    return directory


def embedded_derby_conf(root: Path) -> dict[str, str]:
    """Spark conf for the embedded default: project-local warehouse and Derby metastore (one JVM)."""
    root = root.resolve()
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": (root / "warehouse").as_uri(),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    }


class HiveMetastore:
    """One metastore service whose state lives under ``root``."""

    def __init__(
        self,
        root: Path,
        port: int | None = None,
        extra_jars: list[str] | None = None,
        hadoop_conf: dict[str, str] | None = None,
        postgres_database: str | None = None,
    ) -> None:
        """``extra_jars`` and ``hadoop_conf``: what the service needs for tables on another
        filesystem (the metastore creates, moves and deletes their directories), e.g. S3A's jars and
        ``fs.s3a.*`` settings. ``postgres_database``: keep the metastore's state in this database of
        the PostgreSQL server on 127.0.0.1:5432 (created if missing), not in Derby under ``root``."""
        self.root = root.resolve()
        self.port = port or free_port()
        self.warehouse = self.root / "warehouse"
        self.extra_jars = list(extra_jars or [])
        self.hadoop_conf = dict(hadoop_conf or {})
        self.postgres_database = postgres_database

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.root / "metastore.pid"

    def spark_conf(self) -> dict[str, str]:
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": self.warehouse.as_uri(),
            "spark.hadoop.hive.metastore.uris": self.uri,
        }

    def _properties(self) -> dict[str, str]:
        return {
            "hive.metastore.warehouse.dir": self.warehouse.as_uri(),
            "hive.metastore.schema.verification": "false",
            "hive.async.log.enabled": "false",
            "hive.metastore.event.db.notification.api.auth": "false",
            "datanucleus.schema.autoCreateAll": "true",
            **self._database(),
            # The default pool (BoneCP) is not among pyspark's jars; HikariCP is. Without this,
            # DROP DATABASE fails in the metastore's ACID listener.
            "datanucleus.connectionPoolingType": "HikariCP",
            # Hive 2.x/3.x refuses an alter_table whose columns change type by position, which any Iceberg
            # schema change (and a replace that changes the shape) sends; Iceberg's own tests turn it off.
            "hive.metastore.disallow.incompatible.col.type.changes": "false",
            **self.hadoop_conf,
        }

    def _database(self) -> dict[str, str]:
        if self.postgres_database is None:
            return {
                "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.root / 'metastore_db'};create=true",
                "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            }
        return {
            "javax.jdo.option.ConnectionURL": f"jdbc:postgresql://127.0.0.1:5432/{self.postgres_database}",
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": "postgres",
            # DataNucleus makes a table on its first use, on a connection of its own; a foreign key to a
            # table the request's open transaction wrote (TBL_PRIVS -> TBLS in a create_table) then
            # waits for that transaction, which waits for it: Spark's first CREATE TABLE hung for good.
            # Without the keys the tables are made, and a test metastore loses nothing it needs
            # (autoCreateAll would switch the keys back on), but for one: without the unique key on a
            # database's table names two concurrent creates or renames into one name can both land, so
            # the provider's claim on a name (name_claim.py) is not exclusive here; its tests use Derby.
            "datanucleus.schema.autoCreateAll": "false",
            "datanucleus.schema.autoCreateTables": "true",
            "datanucleus.schema.autoCreateColumns": "true",
            "datanucleus.schema.autoCreateConstraints": "false",
        }

    def _command(self) -> list[str]:
        jars = [*self.extra_jars]
        if self.postgres_database is not None:
            from ctas_devstack.jars import locked_jars

            jars += locked_jars("org.postgresql:postgresql")
        classpath = os.pathsep.join([str(self.root / "conf"), str(spark_home() / "jars" / "*"), *jars])
        return [
            "java",
            "-Xmx512m",
            *SERVICE_JVM_FLAGS,
            f"-Dderby.system.home={self.root}",
            "-cp",
            classpath,
            "org.apache.hadoop.hive.metastore.HiveMetaStore",
            "-p",
            str(self.port),
        ]

    def start(self, timeout: float = 120) -> HiveMetastore:
        if self.postgres_database is not None:
            from ctas_devstack.postgres import create_database

            create_database(self.postgres_database)
        (self.root / "conf").mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        (self.root / "conf" / "hive-site.xml").write_text(hive_site(self._properties()))
        spawn(
            self._command(), root=self.root, log_name="metastore.log", pid_file=self.pid_file, port=self.port,
            timeout=timeout,
        )  # fmt: skip
        return self

    def stop(self, grace: float = 10) -> None:
        stop_pid_file(self.pid_file, grace)


def stop_pid_file(pid_file: Path, grace: float = 10) -> None:
    stop_pid_files([pid_file], grace)


def stop_pid_files(pid_files: list[Path], grace: float = 10) -> None:
    """SIGTERM every process group at once, wait up to ``grace`` for all of them, SIGKILL the rest:
    services stop side by side, not one grace period after another."""
    groups = {}
    for pid_file in pid_files:
        if pid_file.exists():
            groups[pid_file] = int(pid_file.read_text())
            with contextlib.suppress(ProcessLookupError):
                os.killpg(groups[pid_file], signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = dict(groups)
    while alive and time.monotonic() < deadline:
        for pid_file, pid in list(alive.items()):
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                del alive[pid_file]
        time.sleep(0.2)
    for pid in alive.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    for pid_file in groups:
        pid_file.unlink(missing_ok=True)


def _s3(endpoint: str) -> tuple[list[str], dict[str, str]]:
    from ctas_devstack.s3 import hadoop_conf_for, s3_jars

    return s3_jars(), hadoop_conf_for(endpoint)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "action",
        choices=["start", "stop", "embedded"],
        help="start/stop the service, or only write a Spark conf for Spark's embedded Derby metastore",
    )
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/hms"))
    parser.add_argument("--port", type=int, default=9083)
    parser.add_argument("--spark-conf-dir", type=Path, help="also write a spark-defaults.conf using it here")
    parser.add_argument(
        "--postgres-database",
        help="keep the metastore in this database of the PostgreSQL server on 127.0.0.1:5432 "
        "(bash scripts/postgres.sh start), not in Derby under --root",
    )
    parser.add_argument(
        "--s3-endpoint",
        help="an S3 server of ctas_devstack.s3 (e.g. http://127.0.0.1:9000): the S3A jars and settings for "
        "tables on s3a://, for the service and in the Spark conf",
    )
    args = parser.parse_args(argv)
    if args.action == "embedded":
        if not args.spark_conf_dir:
            parser.error("embedded needs --spark-conf-dir")
        write_spark_conf_dir(args.spark_conf_dir, embedded_derby_conf(args.root))
        print(f"Spark conf for the embedded Derby metastore under {args.root.resolve()} in {args.spark_conf_dir}")
        return 0
    jars, hadoop_conf = _s3(args.s3_endpoint) if args.action == "start" and args.s3_endpoint else ([], {})
    metastore = HiveMetastore(
        args.root, args.port, extra_jars=jars, hadoop_conf=hadoop_conf, postgres_database=args.postgres_database
    )
    if args.action == "stop":
        metastore.stop()
        return 0
    metastore.start()
    if args.spark_conf_dir:
        s3_conf = {f"spark.hadoop.{key}": value for key, value in hadoop_conf.items()}
        jars_conf = {"spark.jars": ",".join(jars)} if jars else {}
        write_spark_conf_dir(args.spark_conf_dir, {**metastore.spark_conf(), **s3_conf, **jars_conf})
    print(f"Hive Metastore listening on {metastore.uri}; warehouse {metastore.warehouse}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
