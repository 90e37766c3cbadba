"""Garbage collection of orphaned staging, from a maintenance DAG or the command line.

    airflow-ctas-gc --database analytics --min-age 24h --dry-run
    airflow-ctas-gc --database analytics --min-age 24h
    airflow-ctas-gc --catalog lake --database analytics --conf spark.sql.catalog.lake=... (Iceberg)

This command line protects running transactions by age only (``--min-age`` must exceed your longest
CTAS task); ``airflow ctas gc`` (``cli.py``) and ``AtomicCtasGcOperator`` also ask Airflow which task
instances are still active. A failed pass exits with status 2 and a coded one-line error.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from airflow_provider_ctas.catalogs import gc_strategy
from airflow_provider_ctas.core.errors import CtasError, InvalidInputError
from airflow_provider_ctas.core.identifiers import validate_name
from airflow_provider_ctas.core.protocol import GC_PHASES, PhaseRequest
from airflow_provider_ctas.runners.spark_submit import SparkSubmitRunner

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class GcFailedError(RuntimeError):
    """The GC pass itself failed in Spark (its report's error says why)."""

    code = "GC_FAILED"


def parse_duration(text: str) -> timedelta:
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise InvalidInputError(
            f"duration {text!r} is not a number with an optional unit s, m, h, d or w (e.g. 90s, 30m, 24h, 7d, 2w)"
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def collect_garbage(
    *,
    databases: Iterable[str],
    conn_id: str = "spark_default",
    min_age: timedelta = timedelta(hours=24),
    dry_run: bool = True,
    protect: Iterable[str] = (),
    conf: Mapping[str, Any] | None = None,
    submit_options: Mapping[str, Any] | None = None,
    catalog: str | None = None,
) -> dict[str, Any]:
    """Run one GC pass in Spark and return its report (``SessionCatalogGc``; with ``catalog``, the
    namespaces of that Iceberg catalog, ``IcebergGc``, configured by ``conf``)."""
    names = [validate_name(db, "database") for db in databases]
    if not names:
        raise InvalidInputError("name at least one database to collect garbage in")
    settings: dict[str, Any] = {
        "databases": names,
        "min_age_seconds": min_age.total_seconds(),
        "dry_run": dry_run,
        "protect": sorted(protect),
    }
    settings["kind"] = gc_strategy(catalog).kind
    if catalog is not None:
        settings["catalog"] = validate_name(catalog, "catalog")
    request = PhaseRequest(phases=GC_PHASES, table={}, gc=settings)
    runner = SparkSubmitRunner(conn_id=conn_id, conf=conf, submit_options=submit_options)
    where = ",".join(f"{catalog}.{name}" if catalog else name for name in names)
    result = runner.run(request, name=f"airflow-ctas gc {where}{' (dry run)' if dry_run else ''}")
    if not result.ok:
        error = result.error or {}
        raise GcFailedError(f"garbage collection failed: [{error.get('code')}] {error.get('message')}")
    return result.details


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"--conf {pair!r} is not KEY=VALUE (e.g. spark.sql.catalog.lake.type=hive)")
        conf[key.strip()] = value
    return conf


def print_report(report: dict[str, Any]) -> None:
    for entry in report["entries"]:
        print(f"{entry['action']:>20}  {entry['what']}  ({entry['why']})")
    print(f"summary: {report['summary'] or 'nothing found'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", action="append", required=True, help="repeat for several databases")
    parser.add_argument(
        "--catalog", help="an Iceberg catalog (its namespaces are --database); configure it with --conf"
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the pass (repeat)"
    )
    parser.add_argument("--conn-id", default="spark_default", help="Airflow Spark connection")
    parser.add_argument("--min-age", default="24h", help="keep anything younger: 90s, 30m, 24h, 7d or 2w (24h)")
    parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    parser.add_argument("--json", action="store_true", help="print the whole report as one line of JSON")
    parser.add_argument("--verbose", action="store_true", help="show spark-submit's output")
    args = parser.parse_args(argv)
    if not args.verbose:
        logging.getLogger("airflow.task.hooks").setLevel(logging.WARNING)
    try:
        min_age = parse_duration(args.min_age)
        report = collect_garbage(
            databases=args.database,
            conn_id=args.conn_id,
            min_age=min_age,
            dry_run=args.dry_run,
            conf=parse_conf(args.conf),
            catalog=args.catalog,
        )
    except (CtasError, GcFailedError) as exc:
        print(f"airflow-ctas-gc: [{exc.code}] {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
