"""Why renames into one name take turns: two concurrent renames of managed tables into one name,
straight through the Hive metastore's own client, without the provider (design.md, "Renames into
one name take turns").

    .venv/bin/python benchmarks/rename_race.py [--pairs 30] [--metastore derby|postgres]

A Hive metastore service (the dev stack's; Derby, or PostgreSQL on 127.0.0.1:5432 as
``scripts/postgres.sh start`` provides) and one pyspark driver. Per pair, two managed tables
``s1`` and ``s2`` each get one row, then two ``HiveMetaStoreClient``s rename them to one new name
``t`` at the same instant (``alter_table``, on two threads released by one barrier). One rename wins;
the other fails. The pair is *lost* when ``t`` exists but its directory holds no data: the failing
rename's undo moved the winner's directory (``HiveAlterHandler`` moves it before its commit and moves
it back when the commit fails). Prints each lost pair and the count; exits 1 if any pair was lost.
On the dev stack's PostgreSQL metastore, whose schema is made without Hive's keys
(``ctas_devstack/metastore.py``), both renames can land: two tables named ``t``, also lost.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from durable_retry import local_session  # noqa: E402 - the harness's in-process driver

from ctas_devstack.metastore import HiveMetastore  # noqa: E402

DATABASE = "race"


def _client(spark: Any) -> Any:
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", spark.conf.get("spark.hadoop.hive.metastore.uris"))
    return jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)


def _rename(client: Any, name: str, barrier: threading.Barrier, errors: dict[str, str]) -> None:
    table = client.getTable(DATABASE, name)
    table.setTableName("t")
    barrier.wait()
    try:
        client.alter_table(DATABASE, name, table)
    except Exception as exc:  # the loser's failure is expected: it is reported
        errors[name] = _java_error(exc)


def _java_error(exc: Exception) -> str:
    lines = str(exc).splitlines()
    return next((line.strip() for line in lines if "Exception" in line and "py4j" not in line), lines[0])[:200]


def _files(spark: Any, location: str) -> int:
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return 0
    return sum(1 for status in fs.listStatus(path) if not status.getPath().getName().startswith(("_", ".")))


def one_pair(spark: Any, clients: tuple[Any, Any], pair: int) -> str | None:
    """None when the published ``t`` has its data; else what was lost."""
    spark.sql(f"DROP TABLE IF EXISTS {DATABASE}.t")
    for name in ("s1", "s2"):
        spark.sql(f"DROP TABLE IF EXISTS {DATABASE}.{name}")
        spark.sql(f"CREATE TABLE {DATABASE}.{name} USING parquet AS SELECT {pair} AS pair, '{name}' AS source")
    barrier, errors = threading.Barrier(2), {}
    threads = [
        threading.Thread(target=_rename, args=(client, name, barrier, errors))
        for client, name in zip(clients, ("s1", "s2"), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        location = clients[0].getTable(DATABASE, "t").getSd().getLocation()
    except Exception as exc:  # a schema without Hive's unique key on names lets both renames land
        return f"t cannot be read: {_java_error(exc)} (renames' errors: {errors})"
    if _files(spark, location) > 0:
        return None
    if len(errors) != 1:
        return f"t at {location} has no data files (renames' errors: {errors})"
    ((loser, failed),) = errors.items()
    moved = _files(spark, clients[0].getTable(DATABASE, loser).getSd().getLocation())
    return f"t at {location} has no data files; {loser}'s rename failed ({failed}); {loser} holds {moved} file(s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--metastore", choices=("derby", "postgres"), default="derby")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="rename-race-"))
    database = f"ctas_race_{uuid.uuid4().hex[:8]}" if args.metastore == "postgres" else None
    service = HiveMetastore(root / "hms", postgres_database=database).start()
    try:
        spark = local_session(service.spark_conf())
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        clients = (_client(spark), _client(spark))
        lost = 0
        for pair in range(args.pairs):
            if (what := one_pair(spark, clients, pair)) is not None:
                lost += 1
                print(f"pair {pair}: lost: {what}")
        print(f"{lost} of {args.pairs} pairs lost the published table's data ({args.metastore} metastore service)")
        spark.stop()
        return 1 if lost else 0
    finally:
        service.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
