"""Faster Spark JVM starts for the test run: a class-data-sharing archive of Spark's classes.

A test run starts a few hundred Spark JVMs (every spark-submit, the reader, the Connect server).
Most of a start is loading and verifying Spark's classes; a dynamic AppCDS archive of them cuts a
trivial Hive-enabled PySpark application from ~14 s to ~8.5 s of wall time and 17 to 10.5 CPU-s on
this machine (measured with /tmp/cds-style runs, see the README's CI notes). The JVM only uses an
archive whose class path matches the one it was made with, directories included, and refuses any
non-empty directory in it: Spark's launcher puts ``SPARK_CONF_DIR`` first, so the tests point it at
an empty directory that never changes and hand Spark its settings as ``-Dspark.*`` system
properties in ``SPARK_SUBMIT_OPTS`` instead of a ``spark-defaults.conf`` (SparkConf reads both, and
``--conf`` overrides either). A JVM whose class path differs (another SPARK_CONF_DIR) silently runs
without the archive (``-Xshare:auto``).

Nothing of this is in the product: the operator runs spark-submit exactly as it would anywhere.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_ctas.spark.engine import CONNECT_MODE_VARIABLES
from ctas_devstack.metastore import class_archive_options
from tests.support.pyspark_zip import ensure_compiled

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / ".ctas-local"
CACHE = Path(os.environ.get("CTAS_CDS_CACHE", Path.home() / ".cache" / "airflow-provider-ctas" / "cds"))
"""The archives, kept across checkouts: a clean clone's venv holds the same jar files as the last one
(uv links them to its cache), and an archive made from them serves it instead of a driver's run
spent making it again while every worker's first test waits."""
CONF_DIR = CACHE.parent / "test-spark-conf-empty"
"""SPARK_CONF_DIR of every test JVM: empty, and at a fixed path (the same in every checkout), as the
archive requires."""
KEPT_ARCHIVES = 6
"""The newest archives kept (~200 MB each): every new venv (a clone's own) makes two."""
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""Short-lived drivers: C1-only JIT and the serial GC start ~17% faster (measured 13.4 s -> 11.1 s)."""
READER_SPARK_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
"""The tests' readers, which poll tables the whole time a try runs (tests/support/faults.py): a count
without adaptive planning, over one shuffle partition, costs ~30% less CPU (200 ms, not 290)."""

# Statements that load the classes a driver of this provider loads: Hive client, DDL, writes,
# renames, location changes, partitions, properties.
_DUMP_APP = """
from pyspark.sql import SparkSession
s = SparkSession.builder.enableHiveSupport().getOrCreate()
for q in [
    "CREATE DATABASE IF NOT EXISTS d",
    "CREATE TABLE d.s (id BIGINT, p STRING) USING parquet PARTITIONED BY (p) TBLPROPERTIES ('k'='v')",
    "INSERT INTO d.s BY NAME SELECT id, CAST(id % 2 AS STRING) AS p FROM range(100)",
    "CREATE TABLE d.u USING parquet AS SELECT id, id * 1.5 AS x FROM range(10)",
    "ALTER TABLE d.u RENAME TO d.v",
    "ALTER TABLE d.v SET TBLPROPERTIES ('a'='b')",
    "SHOW TBLPROPERTIES d.v",
    "DESCRIBE TABLE EXTENDED d.s",
    "SHOW PARTITIONS d.s",
    "SELECT count(*), count(DISTINCT id), count_if(id IS NULL) FROM d.s GROUP BY p",
]:
    s.sql(q).collect()
jvm = s.sparkContext._jvm
path = jvm.org.apache.hadoop.fs.Path(s.sql("DESCRIBE TABLE EXTENDED d.v").filter("col_name = 'Location'").first()[1])
path.getFileSystem(s.sparkContext._jsc.hadoopConfiguration()).listStatus(path)
s.stop()
"""


def classic_environ() -> dict[str, str]:
    """This process's environment without pyspark's Spark Connect switches: a test that ran the
    operator over Connect in this process may have left them set (pyspark sets them for a remote
    session), and a child that inherits them makes a Connect session where it means a local one."""
    return {k: v for k, v in os.environ.items() if k not in CONNECT_MODE_VARIABLES}


def _java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return done.stderr.strip()


@dataclass(frozen=True)
class SparkInstall:
    """A pyspark installation: its ``bin`` (spark-submit, python) and its jars. An archive is made
    with, and only serves, one of them."""

    bin_dir: Path
    jars_dir: Path

    @classmethod
    def main(cls) -> SparkInstall:
        import pyspark

        return cls(Path(sys.executable).parent, Path(pyspark.__file__).parent / "jars")

    @classmethod
    def of_venv(cls, venv: Path) -> SparkInstall:
        """A venv with its own pyspark (tests/support/spark_versions.py)."""
        (jars,) = venv.glob("lib/python*/site-packages/pyspark/jars")
        return cls(venv / "bin", jars)

    @property
    def python_lib(self) -> Path:
        """Where ``pyspark.zip`` lies, which spark-submit puts first on a Python driver's path."""
        return self.jars_dir.parent / "python" / "lib"

    def jar_names(self) -> list[str]:
        """The jars in the order the JVM expands ``jars/*``: the directory's own (unsorted) order."""
        return [name for name in os.listdir(self.jars_dir) if name.endswith(".jar")]

    def identity(self) -> list[str]:
        """Each jar's file (device, inode), size and modification time, in class-path order: what
        the JVM compares with an archive's entries. Not the path: the JVM takes another path to the
        same file (a hard link) as the same entry, and every venv uv makes links its jars to uv's
        cache, so a clean clone's installation is the same files at another path."""
        stats = [(name, (self.jars_dir / name).stat()) for name in self.jar_names()]
        return [f"{s.st_dev}:{s.st_ino} {s.st_size} {s.st_mtime_ns} {name}" for name, s in stats]


def archive_path(dist_classpath: str, spark: SparkInstall, *, container: bool = False) -> Path:
    """Named by everything the JVM checks before it uses an archive (the JDK, the class path's jars
    as files, with their sizes and times, the flags): a reinstalled jar makes a new one, never a
    silently unused one. ``container``: the archive of :func:`container_archive`."""
    classpath = ["containers"] if container else [str(CONF_DIR), dist_classpath]
    key = "\n".join([_java_version(), *spark.identity(), str(_archived_jars(spark)), *classpath, *JVM_FLAGS])
    kind = "spark-container" if container else "spark"
    return CACHE / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


@functools.cache
def _archived_jars(spark: SparkInstall) -> Path:
    """The jars directory an archive of ``spark`` is made from: hard links to its jars in the cache,
    named by their identity, so that the archive outlives the checkout it was made in (the JVM
    looks the archive's own entries up again, and a deleted venv's would silently disable it).
    The installation's own directory where links cannot be made or list in another order (the
    JVM compares the entries in order); its archive then serves that checkout only. Once per
    installation and process: its name, the archive's and the dump's command all need it."""
    identity = spark.identity()
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()
    links = CACHE / f"jars-{digest[:16]}"
    if links.is_dir():
        return links
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{links.name}.", dir=CACHE))
    partial.chmod(0o755)  # read by YARN containers too
    try:
        for name in spark.jar_names():
            os.link(spark.jars_dir / name, partial / name)
        if [name for name in os.listdir(partial) if name.endswith(".jar")] != spark.jar_names():
            return spark.jars_dir
        partial.rename(links)
    except OSError:  # another filesystem, or another worker made them first
        return links if links.is_dir() else spark.jars_dir
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return links


def _dump(target: Path, dist_classpath: str, spark: SparkInstall, *, container: bool = False) -> bool:
    """Runs ``_DUMP_APP`` as a test driver starts (spark-submit: the empty conf directory, the
    installation's jars, ``dist_classpath``), or with ``container`` as a YARN container's JVM does
    once its class path begins with the installation's jars (``java -cp <jars>/*``, nothing before)."""
    work = Path(tempfile.mkdtemp(prefix="ctas-cds-"))
    (work / "app.py").write_text(_DUMP_APP)
    partial = target.with_suffix(".partial")
    options = [
        *JVM_FLAGS,
        f"-XX:ArchiveClassesAtExit={partial}",
        "-Dspark.ui.enabled=false",
        "-Dspark.sql.catalogImplementation=hive",
        f"-Dspark.sql.warehouse.dir={(work / 'warehouse').as_uri()}",
        f"-Dspark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={work / 'metastore_db'};create=true",
        f"-Dderby.system.home={work}",
    ]
    python = str(spark.bin_dir / "python")
    env = {
        **classic_environ(),
        "PATH": f"{spark.bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_CONF_DIR": str(CONF_DIR),
        "SPARK_SUBMIT_OPTS": " ".join(options),
    }
    if not container:
        env["SPARK_DIST_CLASSPATH"] = dist_classpath
    submit = _launch_command(spark, ["--master", "local[2]", str(work / "app.py")], env, container=container)
    done = subprocess.run(
        submit,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not partial.exists():
        print(f"tests: no CDS archive (rc {done.returncode}): {done.stderr[-2000:]}", file=sys.stderr)
        return False
    partial.rename(target)
    target.with_suffix(".jars").write_text(_archived_jars(spark).name)
    return True


def compile_pyspark(spark: SparkInstall) -> None:
    """Bytecode in the installation's pyspark zips (``tests/support/pyspark_zip.py``), once."""
    ensure_compiled(spark.python_lib, LOCAL / "pyspark-zip.lock")


def _launch_command(spark: SparkInstall, arguments: list[str], env: dict[str, str], *, container: bool) -> list[str]:
    """The JVM command spark-submit would run (Spark's launcher makes it: the module options Spark
    needs on Java 17, ``SPARK_SUBMIT_OPTS``, the class path), with the installation's jars read
    from :func:`_archived_jars`; with ``container``, those jars are its whole class path, as in a
    YARN container whose class path begins with them."""
    (core,) = spark.jars_dir.glob("spark-core_*.jar")  # spark-core_2.13-4.3.0.jar
    env |= {"SPARK_HOME": str(spark.jars_dir.parent), "SPARK_SCALA_VERSION": core.name.split("_")[1].split("-")[0]}
    own, jars = f"{spark.jars_dir}/*", f"{_archived_jars(spark)}/*"
    made = subprocess.run(
        ["java", "-cp", own, "org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit", *arguments],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    command = [part.strip() for part in made.stdout.split("\0") if part.strip()]  # begins "\0\n"
    classpath = command.index("-cp") + 1
    if own not in command[classpath].split(os.pathsep):
        raise RuntimeError(f"Spark's launcher put {command[classpath]!r} on the class path, not {own}")
    command[classpath] = jars if container else command[classpath].replace(own, jars)
    return command


def container_archive(spark: SparkInstall | None = None) -> Path | None:
    """The archive for YARN's containers of ``spark`` (the main pyspark's unless said): their JVMs
    start without one (each container's class path begins with its own directory, which no archive
    can match) unless Spark's jars come first (``ctas_devstack/yarn.py``'s ``class_archive``).
    A trivial cluster-mode application's driver and executor used 23 CPU-seconds without one, 14
    with one (``-Xshare:on``, so it was used; measured beside a test run)."""
    spark = spark or SparkInstall.main()
    compile_pyspark(spark)  # before any driver of it runs
    if os.environ.get("CTAS_TEST_CDS") == "0":
        return None
    return _ensure(archive_path("", spark, container=True), "", spark, container=True)


def ensure_archive(dist_classpath: str, spark: SparkInstall | None = None) -> Path | None:
    """The archive for this JDK, these jars and flags; made once (about 35 s), under a lock so
    that parallel test workers make it only once. None if it cannot be made (JVMs start as usual),
    or with ``CTAS_TEST_CDS=0`` (to compare). ``dist_classpath``: the ``SPARK_DIST_CLASSPATH`` every
    test JVM gets (the Hadoop connectors a cluster's Hadoop would have, e.g. S3A); ``spark``: the
    installation whose JVMs use it (the main environment's pyspark unless said)."""
    spark = spark or SparkInstall.main()
    compile_pyspark(spark)  # before any driver of it runs
    if os.environ.get("CTAS_TEST_CDS") == "0":
        return None
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    if any(CONF_DIR.iterdir()):
        raise RuntimeError(f"{CONF_DIR} must stay empty: it is every test JVM's SPARK_CONF_DIR")
    return _ensure(archive_path(dist_classpath, spark), dist_classpath, spark)


def _ensure(target: Path, dist_classpath: str, spark: SparkInstall, *, container: bool = False) -> Path | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            os.utime(target)  # in use: the newest are kept
            return target
        if _dump(target, dist_classpath, spark, container=container):
            _prune(keep=target)
            return target
    return None


def _prune(keep: Path) -> None:
    """Removes all but the newest archives (one in use is touched each time a worker asks for it),
    and the jar links no kept archive was made from. A JVM that starts after its archive went runs
    without one, as with ``CTAS_TEST_CDS=0``."""
    archives = sorted(CACHE.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEPT_ARCHIVES:]:
        if old != keep:
            old.unlink(missing_ok=True)
            old.with_suffix(".jars").unlink(missing_ok=True)
    used = {p.read_text().strip() for p in CACHE.glob("spark-*.jars")}
    day_ago = time.time() - 86400  # not links another process is making an archive from now
    for links in CACHE.glob("jars-*"):
        if links.name not in used and links.stat().st_mtime < day_ago:
            shutil.rmtree(links, ignore_errors=True)


def _archive_options(archive: Path | None) -> list[str]:
    return [] if archive is None else class_archive_options(archive)


def submit_opts(conf: Mapping[str, str], archive: Path | None) -> str:
    """SPARK_SUBMIT_OPTS carrying ``conf`` as system properties, plus the archive when there is one."""
    options = [*JVM_FLAGS, *_archive_options(archive)]
    for key, value in sorted(conf.items()):
        if any(c.isspace() for c in f"{key}{value}"):
            raise ValueError(f"test Spark setting {key}={value!r}: no whitespace in SPARK_SUBMIT_OPTS")
        options.append(f"-D{key}={value}")
    return " ".join(options)


def with_archive(opts: str, archive: Path | None) -> str:
    """``opts`` (made by :func:`submit_opts`) with another installation's archive instead of its own."""
    archive_flags = ("-XX:SharedArchiveFile=", "-Xshare:", "-Xlog:cds")
    kept = [option for option in opts.split() if not option.startswith(archive_flags)]
    return " ".join([*kept, *_archive_options(archive)])


def s3_dist_classpath() -> str:
    """The SPARK_DIST_CLASSPATH every test JVM gets: the S3A connector (tests/support/fixtures.py)."""
    from ctas_devstack.s3 import s3_jars

    return os.pathsep.join(s3_jars())


if __name__ == "__main__":
    # scripts/test.sh makes the archives while lint, type checks and unit tests run: the main
    # pyspark's, then that of the release the Iceberg and Delta tests run their drivers on, then the
    # YARN containers' of both (each made once per installation: they stay in CACHE).
    from tests.support.spark_versions import SPARK_FOR_FORMATS, on_release, pyspark_venv

    made = ensure_archive(s3_dist_classpath())
    print(f"tests: CDS archive {made or 'not made (JVMs start without one)'}")
    os.environ["SPARK_DIST_CLASSPATH"] = s3_dist_classpath()  # as every test JVM has it (fixtures.py)
    on_release(SPARK_FOR_FORMATS, archive=True)
    print(f"tests: Spark {SPARK_FOR_FORMATS}'s environment and CDS archive made")
    for install in (SparkInstall.main(), SparkInstall.of_venv(pyspark_venv(SPARK_FOR_FORMATS))):
        print(f"tests: YARN containers' CDS archive {container_archive(install)}")
