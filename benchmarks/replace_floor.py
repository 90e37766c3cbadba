"""The least a same-shape replace can cost over a plain CTAS, in a fresh driver (issue 21).

    bash benchmarks/run.sh --floor [--rows 1e6] [--rounds 4]

Each run is a fresh pyspark driver (local[2], embedded Derby metastore, as the harness's default)
that first starts its metastore client, untimed, and then times one of:

plain       ``CREATE TABLE ... AS SELECT`` of a new table: the baseline.
least       what any replace must do that keeps the old version readable until one metastore call
            switches to the new one: read the existing table's entry (is it there, is it the same
            shape, where is its data), write the new version into a directory of its own (a
            DataFrame append), point the table at it (the flip's one ``alter_table``). No staging
            table, no marker, no fence.
registered  the same with the staging the provider registers (``CREATE TABLE`` of an empty external
            table over that directory, ``INSERT INTO ... BY NAME``, the flip, dropping the staging
            entry): the metastore calls that make a superseded try's staging visible and droppable.
alongside   registered, but the staging entry is created on a second thread while the new version is
            appended to its directory (rows counted by an observation of the write, not a second job).

The variants run interleaved, round by round, against one target of the harness's query's shape.
The catalog calls are the provider's own (``ClassicEngine``); markers, provenance and the fence's
re-reads are left out, so ``registered`` is less than an atomic run's work, never more.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import ctas_benchmark as bench  # noqa: E402 - the harness's query

VARIANTS = ("plain", "least", "registered", "alongside")
TARGET = "target"
DATABASE = "floor"


def _session(world: Path) -> Any:
    from pyspark.sql import SparkSession

    from ctas_devstack.metastore import embedded_derby_conf

    builder = SparkSession.builder.master("local[2]").enableHiveSupport()
    for key, value in {**embedded_derby_conf(world), "spark.log.level": "WARN"}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def run_one(world: Path, variant: str, rows: int, run: int) -> float:
    """Seconds of ``variant``'s work in this (fresh) driver, its metastore client already started."""
    from pyspark.sql import Observation
    from pyspark.sql.functions import count, lit
    from pyspark.util import inheritable_thread_target

    from airflow_provider_ctas.core.identifiers import TableRef
    from airflow_provider_ctas.spark.ddl import create_table_sql
    from airflow_provider_ctas.spark.engine import ClassicEngine

    spark = _session(world)
    select = bench.SELECT.format(rows=rows)
    spark.catalog.databaseExists(DATABASE)  # the metastore client starts: paid alike, not timed
    engine, target = ClassicEngine(spark), TableRef(DATABASE, TARGET)
    version = world / "versions" / f"{variant}_{run}"
    directory = version.as_uri()
    started = time.monotonic()
    if variant == "plain":
        spark.sql(f"CREATE TABLE {DATABASE}.plain_{run} USING parquet AS {select}")
    else:
        if engine.table_entry(target) is None:
            raise RuntimeError(f"{target} is missing")
        version.mkdir(parents=True)  # with its marker, as begin makes it
        (version / "_airflow_ctas.json").write_text(json.dumps({"run": run}))
        if variant == "least":
            spark.sql(select).write.mode("append").format("parquet").save(directory)
        elif variant == "alongside":
            staging = TableRef(DATABASE, f"staging_{run}")
            frame = spark.sql(select)
            ddl = create_table_sql(staging.quoted, frame.schema, "parquet", (), {"run": str(run)}, directory)
            with ThreadPoolExecutor(max_workers=1) as pool:
                created = pool.submit(inheritable_thread_target(spark)(spark.sql), ddl)
                observation = Observation("rows")
                frame.observe(observation, count(lit(1)).alias("rows")).write.mode("append").format("parquet").save(
                    directory
                )
                created.result()
            if observation.get["rows"] != rows:
                raise RuntimeError(f"wrote {observation.get['rows']} rows")
        else:
            staging = TableRef(DATABASE, f"staging_{run}")
            schema = spark.sql(select).schema
            spark.sql(create_table_sql(staging.quoted, schema, "parquet", (), {"run": str(run)}, directory))
            spark.sql(f"INSERT INTO {staging.quoted} BY NAME {select}")
        engine.relocate(target, directory, {"run": str(run)})
        if variant in ("registered", "alongside"):
            engine.drop(staging)
    seconds = time.monotonic() - started
    spark.stop()
    return seconds


def seed(world: Path, rows: int) -> None:
    """In a process of its own, as every run: the embedded metastore admits one JVM at a time."""
    spark = _session(world)
    spark.sql(f"CREATE DATABASE {DATABASE}")
    spark.sql(f"CREATE TABLE {DATABASE}.{TARGET} USING parquet AS {bench.SELECT.format(rows=rows)}")
    spark.stop()


def _in_own_process(world: Path, rows: int, *args: str) -> str:
    command = [sys.executable, __file__, "--world", str(world), "--rows", str(rows), *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]


def measure(world: Path, rows: int, rounds: int) -> dict[str, list[float]]:
    shutil.rmtree(world, ignore_errors=True)
    _in_own_process(world, rows, "--seed")
    seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for run in range(rounds):
        for variant in VARIANTS:
            line = _in_own_process(world, rows, "--one", variant, "--run", str(run))
            seconds[variant].append(json.loads(line)["seconds"])
            print(f"round {run + 1}: {variant} {seconds[variant][-1]:.2f} s", file=sys.stderr)
    return seconds


def render(seconds: dict[str, list[float]], rows: int) -> str:
    base = statistics.median(seconds["plain"])
    lines = [
        f"{rows:.0e} rows, {len(seconds['plain'])} interleaved rounds, a fresh driver per run (seconds after "
        "the metastore client started):",
        "",
        "| variant | median | min-max | median - plain |",
        "|---|---:|---:|---:|",
    ]
    for variant, values in seconds.items():
        median = statistics.median(values)
        lines.append(f"| {variant} | {median:.2f} | {min(values):.2f}-{max(values):.2f} | {median - base:+.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--world", type=Path, default=REPO / ".ctas-local" / "floor")
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rows, world = int(args.rows), args.world.resolve()
    if args.one:
        print(json.dumps({"seconds": run_one(world, args.one, rows, args.run)}))
        return 0
    if args.seed:
        seed(world, rows)
        print("seeded")
        return 0
    print(render(measure(world, rows, args.rounds), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
