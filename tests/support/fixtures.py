"""Session fixtures shared by integration tests: one metastore service, one Airflow DB, one reader."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ctas_devstack.connect_server import ConnectServer
from ctas_devstack.iceberg_rest import IcebergRestCatalog
from ctas_devstack.metastore import HiveMetastore
from ctas_devstack.postgres import drop_database
from ctas_devstack.s3 import S3Server, s3_jars
from tests.support.jvm import JVM_FLAGS, READER_SPARK_CONF, ensure_archive, s3_dist_classpath, submit_opts
from tests.support.table_reader import TableReader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SESSION_ROOT = Path(os.environ["AIRFLOW_HOME"]).parent

# Small, quiet Spark for tests; the metastore service lets the reader and the task's Spark run
# side by side (Spark's embedded Derby metastore admits one JVM).
TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.ui.showConsoleProgress": "false",
    # A heartbeat every 10 s cost an idle session ~1.5 of its ~2.3 CPU-s a minute (metrics read through
    # JMX by C1 code); the run's long-lived readers and servers idle for most of it. 60 s stays under
    # spark.network.timeout (120 s), after which an executor counts as lost, as before.
    "spark.executor.heartbeatInterval": "60s",
}


S3_BUCKET = "warehouse"


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """An S3-compatible server (moto, a real HTTP server in its own process) with one bucket."""
    server = S3Server(SESSION_ROOT / "s3").start()
    server.client().create_bucket(Bucket=S3_BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def metastore(s3: S3Server) -> Iterator[HiveMetastore]:
    """The metastore service of this test process, and the Spark settings every Spark JVM it
    starts from now on uses (``SPARK_SUBMIT_OPTS``, inherited by tasks, drivers and servers;
    ``tests/support/jvm.py`` says why not a spark-defaults.conf). Both reach the S3 server too, as a
    cluster's configuration would: databases on ``s3a://warehouse/...`` hold tables on it."""
    jars = s3_jars()
    # On every Spark JVM's class path, as a cluster whose Hadoop has the S3A connector would have it.
    os.environ["SPARK_DIST_CLASSPATH"] = s3_dist_classpath()
    # The service first: it needs no archive, and it starts while the archive is still being made.
    postgres_database = _metastore_database()
    service = HiveMetastore(
        SESSION_ROOT / "hms", extra_jars=jars, hadoop_conf=s3.hadoop_conf(), postgres_database=postgres_database
    ).start()
    try:
        archive = ensure_archive(os.environ["SPARK_DIST_CLASSPATH"])  # and pyspark's zips compiled
        s3_conf = {f"spark.hadoop.{key}": value for key, value in s3.hadoop_conf().items()}
        # Every test JVM's scratch (Spark's local dirs, Hive's session resources, native libraries)
        # in this session's folder, which goes with a passed session, not in /tmp.
        scratch = SESSION_ROOT / "jvm-tmp"
        scratch.mkdir(exist_ok=True)
        os.environ["SPARK_SUBMIT_OPTS"] = submit_opts(
            {**service.spark_conf(), **TEST_SPARK_CONF, **s3_conf, "java.io.tmpdir": str(scratch)}, archive
        )
        # spark-submit's own first JVM (org.apache.spark.launcher.Main, which builds the command) too.
        os.environ["SPARK_LAUNCHER_OPTS"] = " ".join(JVM_FLAGS)
        yield service
    finally:
        service.stop(STOP_GRACE)
        if postgres_database is not None:
            drop_database(postgres_database)


METASTORE_DATABASE = "CTAS_TEST_METASTORE_DB"
"""``derby`` (the default) or ``postgres``: where the session's metastore service keeps its state
(``scripts/soak.sh --metastore``); PostgreSQL on 127.0.0.1:5432 (``scripts/postgres.sh``)."""


def _metastore_database() -> str | None:
    """This test process's PostgreSQL database for the metastore, or None for Derby."""
    chosen = os.environ.get(METASTORE_DATABASE, "derby")
    if chosen not in ("derby", "postgres"):
        raise ValueError(f"{METASTORE_DATABASE} must be derby or postgres, not {chosen!r}")
    return f"ctas_hms_{os.getpid()}_{uuid.uuid4().hex[:6]}" if chosen == "postgres" else None


STOP_GRACE = 1.0
"""How long a test's service gets to exit after SIGTERM before SIGKILL: its state is thrown away, and
the metastore service, for one, outlasts the dev stack's 10 s default every time (a session's
teardown spent 30 s there)."""

CONNECT_CONN_ID = "spark_connect_test"


@pytest.fixture(scope="session")
def connect_server(metastore: HiveMetastore) -> Iterator[ConnectServer]:
    """A token-protected Spark Connect server on the shared metastore, and the ``spark_connect_test``
    connection to it (the token is the connection's password, as ``SparkConnectHook`` reads it).

    The connection lives in the environment, so trial subprocesses started afterwards inherit it.
    """
    token = secrets.token_urlsafe(24)
    server = ConnectServer(SESSION_ROOT / "connect", conf={"spark.driver.memory": "1g"}, token=token).start()
    conn = {"conn_type": "spark_connect", "host": server.host, "port": server.port, "password": token}
    os.environ[f"AIRFLOW_CONN_{CONNECT_CONN_ID.upper()}"] = json.dumps(conn)
    yield server
    server.stop(STOP_GRACE)


REST_CATALOG = "lake"


@pytest.fixture(scope="session")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergRestCatalog]:
    """The Iceberg project's REST catalog server, once per test worker (the modules that use it share
    an xdist group, so one worker starts it)."""
    server = IcebergRestCatalog(tmp_path_factory.mktemp("iceberg-rest")).start()
    yield server
    server.stop(STOP_GRACE)


@pytest.fixture(scope="session")
def rest_reader(rest: IcebergRestCatalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableReader]:
    """An independent reader of the REST catalog (its own Spark 4.1 JVM, Iceberg's SQL extensions)."""
    from tests.support.iceberg import iceberg_jar

    conf = {
        "spark.jars": iceberg_jar(),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        **rest.conf(REST_CATALOG),
        f"spark.sql.catalog.{REST_CATALOG}.cache-enabled": "false",
    }
    session = TableReader(conf, tmp_path_factory.mktemp("rest-reader") / "reader.log")
    yield session
    session.close()


@pytest.fixture
def on_rest(monkeypatch: pytest.MonkeyPatch, rest: IcebergRestCatalog) -> dict[str, str]:
    """A task's conf for the REST catalog ``lake``; its spark-submit and driver are Spark 4.1's."""
    from tests.support.iceberg import iceberg_jar, task_conf_on_spark41

    return task_conf_on_spark41(monkeypatch, {"spark.jars": iceberg_jar(), **rest.conf(REST_CATALOG)})


@pytest.fixture(scope="session")
def airflow_db() -> None:
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True, timeout=600)


@pytest.fixture(scope="session")
def spark(metastore: HiveMetastore) -> Iterator[SparkSession]:
    """The test's own reader session (one JVM for the whole run)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[1]").appName("ctas-tests-reader").enableHiveSupport()
    for key, value in READER_SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def database(spark: SparkSession) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture
def s3_database(spark: SparkSession, s3: S3Server) -> Iterator[str]:
    """A database whose location is on the S3 server: its tables live in the bucket."""
    name = f"s3_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION 's3a://{S3_BUCKET}/{name}.db'")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture
def stack(airflow_db: None, metastore: HiveMetastore, spark: SparkSession) -> HiveMetastore:
    """Everything an end-to-end test needs: metastore service, Airflow DB and the reader."""
    return metastore
