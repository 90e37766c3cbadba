"""What a durable try saves: the retry after a worker lost once the write was done (issue 48).

    bash benchmarks/run.sh --durable [--rows 1e7] [--rounds 3]

One pyspark driver (local[2], embedded Derby metastore, as the harness's default) runs the
session-catalog strategy's phases in process, as a driver runs them. In each round, for a replace
(a flip) of a table by the harness's query, try 1 begins, writes and records its staging, and then
its task is gone (the driver stops there, as after a lost worker). Try 2 of the same transaction is
timed from begin to the end of its publish:

recomputed   without ``durable``: begin drops try 1's staging, prepare runs the query again, commit.
adopted      with ``durable=True``: begin adopts try 1's staging, prepare runs nothing, commit.

The two alternate within each round. The report (build/reports/durable.md, with a history marker)
gives each one's median and spread and the median of the per-round ratio adopted / recomputed.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import ctas_benchmark as bench  # noqa: E402 - the harness's query

from ctas_devstack import reports  # noqa: E402

DATABASE = "durable"
VARIANTS = ("recomputed", "adopted")
DURABLE = reports.DURABLE


def local_session(conf: dict[str, str]) -> Any:
    """The harness's in-process driver: local[2], Hive support, quiet, with ``conf``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").enableHiveSupport()
    for key, value in {**conf, "spark.log.level": "WARN", "spark.ui.showConsoleProgress": "false"}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _session(world: Path) -> Any:
    from ctas_devstack.metastore import embedded_derby_conf

    return local_session(embedded_derby_conf(world))


class QuietLog:
    """A driver's log for a measurement: warnings only."""

    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        print(f"  warning: {message}", file=sys.stderr)


def _executor(spark: Any, key: Any, target: str, sql: str, try_number: int, durable: bool) -> Any:
    from airflow_provider_ctas.catalogs import create_two_phase_table
    from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
    from airflow_provider_ctas.core.durable import digest_of
    from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseRequest

    table = create_two_phase_table(
        key=key, conn_id="spark_default", target=target, mode="replace", table_format="parquet"
    )
    table.begin(try_number, "2026-01-01T00:00:00+00:00")
    digest = digest_of(sql, {"target": str(table.target), **table.spec_to_dict()}, [], {})
    request = PhaseRequest(phases=RUN_PHASES, table=table.to_dict(), sql=sql, durable=digest if durable else None)
    return SessionCatalogExecutor(spark, table, request, QuietLog())  # type: ignore[arg-type]


def _run(executor: Any, *phases: str) -> None:
    from airflow_provider_ctas.core.protocol import PhaseReport

    for phase in phases:
        executor.run(phase, PhaseReport(phase, "ok", 0.0))


def one_retry(spark: Any, variant: str, rows: int, run: int) -> float:
    """Seconds of try 2 (begin to published) after try 1 prepared and was lost."""
    from airflow_provider_ctas.core.transaction import TransactionKey

    target, sql = f"{DATABASE}.t_{variant}_{run}", bench.SELECT.format(rows=rows)
    spark.sql(f"CREATE TABLE {target} USING parquet AS {bench.SELECT.format(rows=10)}")
    key = TransactionKey("durable_benchmark", "ctas", f"run_{uuid.uuid4().hex}")
    first = _executor(spark, key, target, sql, 1, durable=True)
    _run(first, "begin", "prepare")
    first.keep_for_next_try(first.ctx.request.durable)
    second = _executor(spark, key, target, sql, 2, durable=variant == "adopted")
    started = time.monotonic()
    _run(second, "begin", "prepare", "commit")
    seconds = time.monotonic() - started
    if not second.published or (second.ctx.adopted is not None) != (variant == "adopted"):
        raise RuntimeError(f"{variant}: try 2 did not publish as expected")
    published = spark.table(target).count()
    if published != rows:
        raise RuntimeError(f"{variant}: {published} rows published, not {rows}")
    spark.sql(f"DROP TABLE {target}")
    return seconds


def measure(world: Path, rows: int, rounds: int) -> dict[str, list[float]]:
    shutil.rmtree(world, ignore_errors=True)
    spark = _session(world)
    spark.sql(f"CREATE DATABASE {DATABASE}")
    one_retry(spark, "adopted", 1000, 999)  # warm the JVM's code paths, untimed
    seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for run in range(rounds):
        for variant in VARIANTS if run % 2 == 0 else reversed(VARIANTS):
            seconds[variant].append(one_retry(spark, variant, rows, run))
            print(f"round {run + 1}: {variant} {seconds[variant][-1]:.2f} s", file=sys.stderr)
    spark.stop()
    return seconds


def render(seconds: dict[str, list[float]], rows: int) -> str:
    ratios = [a / r for a, r in zip(seconds["adopted"], seconds["recomputed"], strict=True)]
    recomputed, adopted = statistics.median(seconds["recomputed"]), statistics.median(seconds["adopted"])
    cells = [
        reports.stamp(),
        reports.commit("airflow_provider_ctas", "benchmarks"),
        f"{rows:.0e} ({len(ratios)})",
        f"{recomputed:.2f} -> {adopted:.2f} s, {statistics.median(ratios):.3f}",
    ]
    lines = [
        "# Durable tries: the retry after a lost worker",
        "",
        "Generated by `bash benchmarks/run.sh --durable` (benchmarks/durable_retry.py; do not edit by hand).",
        "",
        f"Run at commit {cells[1]} on {platform.node()} ({platform.machine()}): a replace (a flip) by the "
        f"harness's query at {rows:.0e} rows; try 1 wrote and recorded its staging and was lost; try 2 timed from "
        f"begin to published, {len(ratios)} rounds, the two variants alternating.",
        "",
        "| try 2 | median (s) | min-max (s) |",
        "|---|---:|---:|",
    ]
    for variant, values in seconds.items():
        lines.append(f"| {variant} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |")
    lines += [
        "",
        f"Per round, adopted / recomputed: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}). The adopted retry publishes what try 1 wrote: "
        "begin's metadata calls and the publish, no Spark job over the data.",
        "",
        reports.marker(DURABLE, cells),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--world", type=Path, default=REPO / ".ctas-local" / "durable")
    args = parser.parse_args(argv)
    rows = int(args.rows)
    text = render(measure(args.world.resolve(), rows, args.rounds), rows)
    DURABLE.report.parent.mkdir(parents=True, exist_ok=True)
    DURABLE.report.write_text(text)
    print(text)
    print(f"written to {DURABLE.report}; bash scripts/publish_reports.sh publishes it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
