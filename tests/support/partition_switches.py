"""Concurrent partition switches against one metastore service, straight through its thrift API.

Two writers switch every partition of one table to a location set of their own in one
``alter_partitions`` call each (what an ``overwrite_partitions`` publish and a superseded try's
switch back send), while readers list the partitions (what a query planning a scan of the table
sends). Every listing must show one writer's one call: all of its partitions in one location set.
Derby, which reads a row at a time under locks, was seen to fail this; PostgreSQL must not.

Each writer and reader is its own thrift connection, called from its own Python thread through the
tests' reader JVM (pyspark pins a Java thread to each Python thread), so the calls really overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE = "switched"


@dataclass
class Switches:
    """What the readers saw: every listing's location sets, and the ones that were mixed."""

    writes: int = 0
    reads: int = 0
    mixed: list[list[str]] = field(default_factory=list)
    final: set[str] = field(default_factory=set)


def _client(jvm: Any, uri: str) -> Any:
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", uri)
    return jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)


def _java_list(jvm: Any, items: list[Any]) -> Any:
    out = jvm.java.util.ArrayList()
    for item in items:
        out.add(item)
    return out


def _location_sets(client: Any, database: str) -> set[str]:
    """The location set of each partition: the directory above its ``p=`` directory."""
    return {p.getSd().getLocation().rsplit("/", 2)[-2] for p in client.listPartitions(database, TABLE, -1)}


def create_partitioned_table(jvm: Any, uri: str, database: str, base: str, partitions: int) -> None:
    """A partitioned parquet table with ``partitions`` partitions, all in the location set ``start``."""
    api = jvm.org.apache.hadoop.hive.metastore.api
    client = _client(jvm, uri)
    try:
        client.createDatabase(api.Database(database, "", f"{base}/{database}.db", jvm.java.util.HashMap()))
        sd = api.StorageDescriptor()
        sd.setCols(_java_list(jvm, [api.FieldSchema("id", "bigint", "")]))
        sd.setLocation(f"{base}/{TABLE}")
        sd.setInputFormat("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat")
        sd.setOutputFormat("org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat")
        serde = api.SerDeInfo()
        serde.setSerializationLib("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
        serde.setParameters(jvm.java.util.HashMap())
        sd.setSerdeInfo(serde)
        table = api.Table()
        table.setDbName(database)
        table.setTableName(TABLE)
        table.setSd(sd)
        table.setPartitionKeys(_java_list(jvm, [api.FieldSchema("p", "string", "")]))
        table.setTableType("EXTERNAL_TABLE")
        parameters = jvm.java.util.HashMap()
        parameters.put("EXTERNAL", "TRUE")
        table.setParameters(parameters)
        client.createTable(table)
        created = []
        for index in range(partitions):
            partition = api.Partition()
            partition.setDbName(database)
            partition.setTableName(TABLE)
            partition.setValues(_java_list(jvm, [str(index)]))
            partition_sd = sd.deepCopy()
            partition_sd.setLocation(f"{base}/{TABLE}/start/p={index}")
            partition.setSd(partition_sd)
            partition.setParameters(jvm.java.util.HashMap())
            created.append(partition)
        client.add_partitions(_java_list(jvm, created))
    finally:
        client.close()


@dataclass
class _Run:
    jvm: Any
    uri: str
    database: str
    base: str
    stop: float
    enough: tuple[int, int]
    """(writes, reads) after which the run may end before ``stop``."""
    seen: Switches = field(default_factory=Switches)
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[BaseException] = field(default_factory=list)

    def running(self) -> bool:
        with self.lock:
            done = self.seen.writes >= self.enough[0] and self.seen.reads >= self.enough[1]
        return not done and time.monotonic() < self.stop

    def write(self, name: str) -> None:
        client = _client(self.jvm, self.uri)
        try:
            switched = 0
            while self.running():
                tag = f"{name}{switched % 2}"
                switched += 1
                partitions = client.listPartitions(self.database, TABLE, -1)
                for partition in partitions:
                    partition.getSd().setLocation(f"{self.base}/{TABLE}/{tag}/p={partition.getValues().get(0)}")
                client.alter_partitions(self.database, TABLE, partitions)
                with self.lock:
                    self.seen.writes += 1
        finally:
            client.close()

    def read(self) -> None:
        client = _client(self.jvm, self.uri)
        try:
            while self.running():
                sets = _location_sets(client, self.database)
                with self.lock:
                    self.seen.reads += 1
                    if len(sets) > 1:
                        self.seen.mixed.append(sorted(sets))
        finally:
            client.close()

    def guarded(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # raised by the caller, not lost in the thread
            self.errors.append(exc)


def switch_concurrently(
    jvm: Any,
    uri: str,
    database: str,
    base: str,
    seconds: float,
    readers: int = 2,
    enough: tuple[int, int] | None = None,
) -> Switches:
    """Two writers alternate their own two location sets while ``readers`` list, for ``seconds`` or
    until ``enough`` (writes, reads) happened: a busy machine then takes longer instead of checking less."""
    run = _Run(jvm, uri, database, base, time.monotonic() + seconds, enough or (sys.maxsize, sys.maxsize))
    threads = [threading.Thread(target=run.guarded, args=(run.write, name)) for name in ("a", "b")]
    threads += [threading.Thread(target=run.guarded, args=(run.read,)) for _ in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if run.errors:
        raise run.errors[0]
    client = _client(jvm, uri)
    try:
        run.seen.final = _location_sets(client, database)
    finally:
        client.close()
    return run.seen


def main(argv: list[str] | None = None) -> int:
    """The same check on a Derby and a PostgreSQL metastore service, one JSON line each."""
    from pyspark.java_gateway import launch_gateway

    from ctas_devstack.metastore import HiveMetastore
    from ctas_devstack.postgres import drop_database

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--readers", type=int, default=2)
    args = parser.parse_args(argv)
    gateway = launch_gateway()
    try:
        for backend in ("derby", "postgres"):
            root = Path(tempfile.mkdtemp(prefix=f"ctas-switches-{backend}-"))
            database = f"ctas_hms_{uuid.uuid4().hex[:10]}" if backend == "postgres" else None
            service = HiveMetastore(root, postgres_database=database).start()
            try:
                base = (root / "data").as_uri()
                create_partitioned_table(gateway.jvm, service.uri, "switches", base, args.partitions)
                seen = switch_concurrently(gateway.jvm, service.uri, "switches", base, args.seconds, args.readers)
            finally:
                service.stop(1)
                if database is not None:
                    drop_database(database)
            report = {"metastore": backend, "partitions": args.partitions, "seconds": args.seconds,
                      "writes": seen.writes, "reads": seen.reads, "mixed": len(seen.mixed),
                      "examples": seen.mixed[:3], "final": sorted(seen.final)}  # fmt: skip
            print(json.dumps(report), flush=True)
    finally:
        gateway.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
