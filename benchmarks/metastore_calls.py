"""Metastore calls per publish, counted where the metastore receives them (issue 53).

    bash benchmarks/run.sh --metastore-calls [--partitions 1 10 100 1000] [--rows 10000] [--metastore derby]

A Hive metastore service (the dev stack's; its state in PostgreSQL on 127.0.0.1:5432, which
``run.sh`` starts, as a production metastore's is, or with ``--metastore derby`` in Derby) sits
behind the dev stack's proxy, which counts the Thrift calls it forwards, by method. One pyspark
driver (local[2]) reaches the service through the proxy and runs, per operation, the plain statement
a user runs for it and the provider's phases in process, phase by phase, as a driver runs them, each
on a table of its own (one that exists already where the operation replaces one). Both run in the
same warm session, so neither pays the session's first calls; the counts do not depend on the rows,
only on the operation and its partitions.

The report (build/reports/metastore-calls.md, with a history marker) gives per operation the plain
statement's calls, the provider's per phase, the calls it makes beyond the plain statement's, by
method, and where in the provider each call is made (the driver's Python stack when the proxy
forwarded it: a call is made while the Python call that caused it waits for the JVM).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from durable_retry import QuietLog, local_session  # noqa: E402 - the harness's in-process driver

from ctas_devstack import reports  # noqa: E402
from ctas_devstack.fault_proxy import FaultProxy  # noqa: E402
from ctas_devstack.metastore import HiveMetastore  # noqa: E402

METASTORE_CALLS = reports.METASTORE_CALLS
DATABASE = "calls"
PHASES = ("begin", "prepare", "commit")
SELECT = "SELECT id, id * 2 AS amount, concat('c', CAST(id % {partitions} AS STRING)) AS p FROM range({rows})"


@dataclass(frozen=True)
class Operation:
    name: str
    mode: str
    partitions: int
    """The target's partitions the operation writes (0: unpartitioned)."""
    existing: bool
    """Whether the target exists before (a replace of it)."""
    plain: str
    """The plain statement a user runs for the same change ({t}: the table, {q}: the query)."""
    allow_swap: bool = False


@dataclass
class Counted:
    plain: Counter[str] = field(default_factory=Counter)
    phases: dict[str, Counter[str]] = field(default_factory=dict)
    sources: dict[str, Counter[tuple[str, str]]] = field(default_factory=dict)
    """Per phase, the provider's calls by (method, where in the provider it was made)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Per phase, as long as it took (the machine's speed moves it; the counts it does not)."""
    plain_seconds: float = 0.0
    publish_seconds: float = 0.0
    """The commit's publish step alone (the driver's ``details.publish.seconds``)."""
    commit_service: dict[str, float] = field(default_factory=dict)
    """Per method, the seconds the service took to answer the commit's calls (the proxy's timing)."""

    @property
    def atomic(self) -> Counter[str]:
        return sum(self.phases.values(), Counter())


def operations(partitions: list[int]) -> list[Operation]:
    found = [
        Operation(
            "create, partitioned (8 partitions): rename",
            "create",
            8,
            False,
            "CREATE TABLE {t} USING parquet PARTITIONED BY (p) AS {q}",
        ),
        Operation("replace, same shape, unpartitioned: flip", "replace", 0, True, "INSERT OVERWRITE TABLE {t} {q}"),
        Operation(
            "replace, partitioned (8 partitions): swap (allow_swap)",
            "replace",
            8,
            True,
            "INSERT OVERWRITE TABLE {t} {q}",
            allow_swap=True,
        ),
    ]
    found += [
        Operation(
            f"overwrite_partitions, {count} partition(s) replaced",
            "overwrite_partitions",
            count,
            True,
            # The same change in plain Spark: a dynamic partition overwrite.
            "INSERT OVERWRITE TABLE {t} {q}",
        )
        for count in partitions
    ]
    return found


def _session(service: HiveMetastore, proxy: FaultProxy) -> Any:
    return local_session(
        {**service.spark_conf(), "spark.hadoop.hive.metastore.uris": f"thrift://127.0.0.1:{proxy.port}"}
    )


class Sources:
    """Where the provider made each call: the innermost frames of the provider's package on the
    main thread's stack at the moment the proxy forwards it."""

    def __init__(self) -> None:
        self.main = threading.main_thread().ident
        self.current: Counter[tuple[str, str]] | None = None

    def __call__(self, method: str) -> None:
        frame = sys._current_frames().get(self.main or 0)
        if self.current is None or frame is None:
            return
        package = str(REPO / "airflow_provider_ctas")
        ours = [f for f in traceback.extract_stack(frame) if f.filename.startswith(package)]
        where = " < ".join(
            f"{Path(f.filename).relative_to(package).with_suffix('').as_posix().replace('/', '.')}.{f.name}"
            for f in reversed(ours[-2:])
        )
        self.current[(method, where or "?")] += 1


def _counted(proxy: FaultProxy, work: Callable[[], object]) -> Counter[str]:
    before = Counter(proxy.calls)
    work()
    return Counter(proxy.calls) - before


def _query(operation: Operation, rows: int) -> str:
    return SELECT.format(partitions=max(operation.partitions, 1), rows=rows)


def _table(spark: Any, operation: Operation, rows: int) -> str:
    target = f"{DATABASE}.t_{uuid.uuid4().hex[:8]}"
    if operation.existing:
        partitioned = " PARTITIONED BY (p)" if operation.partitions else ""
        spark.sql(f"CREATE TABLE {target} USING parquet{partitioned} AS {_query(operation, rows)}")
    return target


def _atomic(spark: Any, proxy: FaultProxy, operation: Operation, rows: int, sources: Sources, into: Counted) -> None:
    from airflow_provider_ctas.catalogs import create_two_phase_table
    from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
    from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseReport, PhaseRequest
    from airflow_provider_ctas.core.transaction import TransactionKey

    target = _table(spark, operation, rows)
    table = create_two_phase_table(
        key=TransactionKey("metastore_calls", "ctas", f"run_{uuid.uuid4().hex}"),
        conn_id="spark_default",
        target=target,
        mode=operation.mode,
        table_format="parquet",
        partition_by=["p"] if operation.partitions else [],
        allow_swap=operation.allow_swap,
    )
    table.begin(1, "2026-01-01T00:00:00+00:00")
    request = PhaseRequest(phases=RUN_PHASES, table=table.to_dict(), sql=_query(operation, rows))
    executor = SessionCatalogExecutor(spark, table, request, QuietLog())  # type: ignore[arg-type]
    for phase in PHASES:
        sources.current = into.sources.setdefault(phase, Counter())
        started, answering = time.monotonic(), dict(proxy.call_seconds)
        into.phases[phase] = _counted(proxy, lambda phase=phase: executor.run(phase, PhaseReport(phase, "ok", 0.0)))
        into.seconds[phase] = time.monotonic() - started
        if phase == "commit":
            into.commit_service = {
                m: s - answering.get(m, 0.0) for m, s in proxy.call_seconds.items() if s > answering.get(m, 0.0)
            }
        sources.current = None
    if not executor.progress.published:
        raise RuntimeError(f"{operation.name}: the provider did not publish")
    into.publish_seconds = float(executor.details["publish"]["seconds"])


def _plain(spark: Any, proxy: FaultProxy, operation: Operation, rows: int) -> tuple[Counter[str], float]:
    target = _table(spark, operation, rows)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic" if operation.partitions else "static")
    statement = operation.plain.format(t=target, q=_query(operation, rows))
    started = time.monotonic()
    counted = _counted(proxy, lambda: spark.sql(statement))
    return counted, time.monotonic() - started


def measure(partitions: list[int], rows: int, metastore: str) -> dict[str, Counted]:
    root = Path(tempfile.mkdtemp(prefix="metastore-calls-"))
    database = f"ctas_calls_{uuid.uuid4().hex[:8]}" if metastore == "postgres" else None
    service = HiveMetastore(root / "hms", postgres_database=database).start()
    sources = Sources()
    proxy = FaultProxy(("127.0.0.1", service.port), on_call=sources).start()
    try:
        spark = _session(service, proxy)
        spark.sql(f"CREATE DATABASE {DATABASE}")
        warm = Operation("warm-up", "replace", 0, True, "INSERT OVERWRITE TABLE {t} {q}")
        _plain(spark, proxy, warm, 10)
        _atomic(spark, proxy, warm, 10, sources, Counted())
        counted: dict[str, Counted] = {}
        for operation in operations(partitions):
            plain, plain_seconds = _plain(spark, proxy, operation, rows)
            result = Counted(plain=plain, plain_seconds=plain_seconds)
            _atomic(spark, proxy, operation, rows, sources, result)
            counted[operation.name] = result
            print(f"{operation.name}: plain {result.plain.total()}, atomic {result.atomic.total()}", file=sys.stderr)
        spark.stop()
    finally:
        proxy.stop()
        service.stop(grace=1.0)
        shutil.rmtree(root, ignore_errors=True)
    return counted


def _answering(result: Counted) -> str:
    """The service's time over the commit's calls, and the method that took most of it."""
    if not result.commit_service:
        return "-"
    slowest = max(result.commit_service, key=lambda m: result.commit_service[m])
    total = sum(result.commit_service.values())
    return f"{total:.2f} s (`{slowest}` {result.commit_service[slowest]:.2f} s)"


def _methods(counts: Counter[str]) -> str:
    return ", ".join(f"`{name}` {count}" for name, count in sorted(counts.items(), key=lambda i: (-i[1], i[0]))) or "-"


def _beyond(result: Counted) -> str:
    """The provider's calls beyond the plain statement's, by method (fewer: negative)."""
    atomic, plain = result.atomic, result.plain
    diff = {name: atomic[name] - plain[name] for name in atomic.keys() | plain.keys() if atomic[name] != plain[name]}
    return ", ".join(f"`{n}` {d:+d}" for n, d in sorted(diff.items(), key=lambda i: (-i[1], i[0]))) or "none"


BACKING = {"postgres": "PostgreSQL", "derby": "Derby"}


def render(counted: dict[str, Counted], rows: int, metastore: str) -> str:
    calls = "; ".join(f"{name.split(':')[0]} {r.atomic.total()}/{r.plain.total()}" for name, r in counted.items())
    largest = list(counted.values())[-1]
    cells = [
        reports.stamp(),
        reports.commit("airflow_provider_ctas", "benchmarks", "ctas_devstack"),
        f"{calls} (metastore on {BACKING[metastore]}; the last operation's publish {largest.publish_seconds:.2f} s)",
    ]
    lines = [
        "# Metastore calls per publish",
        "",
        "Generated by `bash benchmarks/run.sh --metastore-calls` (benchmarks/metastore_calls.py; do not edit by hand).",
        "",
        f"Run at commit {cells[1]}: the Thrift calls a Hive metastore service received (counted by a proxy in "
        f"front of it), per operation on a parquet table in the session catalog, {rows} rows: the plain "
        "statement a user runs for the same change, and the provider's phases in one warm driver. A platform "
        "team sees this cost at scale: each call is a metastore round trip and, for most, a database "
        "transaction in the metastore's backing store.",
        "",
        "| operation | plain statement | provider: begin | prepare | commit | provider total | beyond plain "
        "| plain statement's time | commit's time | publish's time | the metastore answering the commit's calls |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, result in counted.items():
        phases = [str(result.phases[p].total()) for p in PHASES]
        lines.append(
            f"| {name} | {result.plain.total()} | {' | '.join(phases)} | {result.atomic.total()} | "
            f"{result.atomic.total() - result.plain.total():+d} | {result.plain_seconds:.2f} s | "
            f"{result.seconds['commit']:.2f} s | {result.publish_seconds:.2f} s | {_answering(result)} |"
        )
    lines += [
        "",
        f"Times are one run's, in the warm driver, with the metastore service ({BACKING[metastore]}) on the same "
        "machine: they "
        "show how the work scales with the partitions, not what a remote metastore costs. The plain "
        "statement's time is its whole run (writing the partitions' files and moving them into place); the "
        "commit's is fence, publish, provenance and clean-up; the publish's is the metastore switch within it. "
        "Switching N partitions is one `alter_partitions` call, in which the metastore updates each "
        "partition's row: that call is most of a large publish's time (the plain dynamic overwrite leaves the "
        "partitions' rows as they are and replaces their files instead). The last column is the service's "
        "time, measured by the proxy from forwarding each of the commit's calls to the start of its answer: "
        "what the driver cannot make shorter; the rest of the commit is the driver's own work (for a "
        "partition switch, reading and repointing each listed partition through py4j).",
    ]
    lines += ["", "## By method", "", "| operation | plain statement | provider | beyond plain |", "|---|---|---|---|"]
    for name, result in counted.items():
        lines.append(f"| {name} | {_methods(result.plain)} | {_methods(result.atomic)} | {_beyond(result)} |")
    lines += [
        "",
        "## Where the provider makes them",
        "",
        "Each call with the provider's function that made it (and its caller); a call made inside a SQL "
        "statement the provider runs (`catalog.sql`) is Spark's command at work.",
        "",
        "| operation | phase | calls: method, count, where |",
        "|---|---|---|",
    ]
    for name, result in counted.items():
        for phase in PHASES:
            made = result.sources.get(phase, Counter())
            cell = "<br>".join(
                f"`{method}` {count}: {where}"
                for (method, where), count in sorted(made.items(), key=lambda item: (item[0][1], item[0][0]))
            )
            lines.append(f"| {name} | {phase} | {cell or '-'} |")
    lines += ["", reports.marker(METASTORE_CALLS, cells)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--metastore", choices=sorted(BACKING), default="postgres")
    args = parser.parse_args(argv)
    text = render(measure(args.partitions, args.rows, args.metastore), args.rows, args.metastore)
    METASTORE_CALLS.report.parent.mkdir(parents=True, exist_ok=True)
    METASTORE_CALLS.report.write_text(text)
    print(text)
    print(f"written to {METASTORE_CALLS.report}; bash scripts/publish_reports.sh publishes it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
