"""``airflow ctas gc``: garbage collection as an Airflow CLI command of this provider.

Unlike the standalone ``airflow-ctas-gc`` (which has no Airflow database at hand and relies on
``--min-age`` alone), it asks Airflow's metadata database, as ``AtomicCtasGcOperator`` does, which
candidates' task instances are still active, and spares them.

    airflow ctas gc --database analytics --min-age 24h --dry-run
    airflow ctas gc --database analytics --min-age 24h [--json]
    airflow ctas gc --catalog lake --database analytics --conf spark.sql.catalog.lake=... (Iceberg)
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core.errors import CtasError
from airflow_provider_ctas.gc import GcFailedError, collect_garbage, parse_conf, parse_duration, print_report
from airflow_provider_ctas.operators.gc import ACTIVE_STATES

if TYPE_CHECKING:
    from argparse import Namespace


def get_cli_commands() -> list[Any]:
    """The provider's CLI commands (provider info ``cli``; Airflow 3.2+)."""
    from airflow.cli import cli_config

    config: Any = cli_config  # untyped module
    arg, action, group = config.Arg, config.ActionCommand, config.GroupCommand
    args = (
        arg(("--database",), action="append", required=True, help="a database to collect in; repeat for several"),
        arg(("--conn-id",), default="spark_default", help="the Spark connection to run the pass with"),
        arg(("--min-age",), default="24h", help="keep anything younger: 90s, 30m, 24h, 7d or 2w (default 24h)"),
        arg(("--dry-run",), action="store_true", help="only list what would be removed"),
        arg(("--json",), action="store_true", help="print the whole report as one line of JSON"),
        arg(("--catalog",), help="an Iceberg catalog (its namespaces are --database); configure it with --conf"),
        arg(("--conf",), action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeat)"),
    )
    gc = action(
        name="gc",
        help="Remove what failed, killed or crashed AtomicCtasOperator tasks left (sparing active ones)",
        func=config.lazy_load_command("airflow_provider_ctas.cli.gc_command"),
        args=args,
    )
    return [group(name="ctas", help="airflow-provider-ctas: atomic CTAS on Spark", subcommands=[gc])]


def active_transactions(entries: list[dict[str, Any]]) -> set[str]:
    """Transaction ids of candidates whose task instance Airflow reports as still active."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    protect = set()
    with create_session() as session:
        for entry in entries:
            task = entry.get("task") or {}
            known = all(task.get(key) for key in ("dag_id", "task_id", "run_id"))
            if not entry["action"].startswith("would be") or not known:
                continue
            states = session.scalars(
                select(TaskInstance.state).where(
                    TaskInstance.dag_id == task["dag_id"],
                    TaskInstance.task_id == task["task_id"],
                    TaskInstance.run_id == task["run_id"],
                )
            ).all()
            if any(str(state) in ACTIVE_STATES for state in states):
                protect.add(entry["txn_id"])
    return protect


def gc_command(args: Namespace) -> None:
    """A failed pass exits with status 2 and a coded one-line error, never a traceback."""
    try:
        min_age = parse_duration(args.min_age)
        options = {
            "databases": args.database,
            "conn_id": args.conn_id,
            "min_age": min_age,
            "conf": parse_conf(args.conf),
            "catalog": args.catalog,
        }
        listing = collect_garbage(dry_run=True, **options)
        protect = active_transactions(listing["entries"])
        report = listing if args.dry_run else collect_garbage(dry_run=False, protect=protect, **options)
    except (CtasError, GcFailedError) as exc:
        code = getattr(exc, "code", "GC_FAILED")
        print(f"airflow ctas gc: [{code}] {exc}", file=sys.stderr)
        sys.exit(2)
    report["protected"] = sorted(protect)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
