"""A change's effect on the driver's phases, measured against another revision in the same minutes.

    bash benchmarks/run.sh --ab <revision> [--approach atomic_replace_flip] [--rows 1e6] [--rounds 4]

``--approach`` is an atomic approach on the embedded default (``atomic_*``) or over Spark Connect
(``connect_*``, against one Connect server both sides use).

A wall-time ratio over runs minutes apart moves by more than a sub-second change (this machine's
runs of one approach spread ±10 %). This runs one approach of ``ctas_benchmark.py`` alternately with
the provider package of ``<revision>`` (``git archive``, put first on ``PYTHONPATH``) and with this
tree's, in one harness world (one seeded target, one metastore), and prints each run's phases as
the driver timed them and the medians per side. Nothing in the tree is changed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import ctas_benchmark as bench  # noqa: E402 - the harness's world, query, seeds and one run

PACKAGE = "airflow_provider_ctas"


def export_package(revision: str, into: Path) -> Path:
    """The provider package as ``revision`` has it, under ``into``; returns the directory to put first on the path."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", revision, PACKAGE], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Over Spark Connect the phases run in the task process, which takes the side's package from
    its ``PYTHONPATH`` as a spark-submit driver does; both sides use one Connect server."""
    root = args.root.resolve()
    env, _ = bench.prepare(root)
    connect = args.approach.startswith("connect_")
    server = bench.start_connect_server(root, env) if connect else None
    try:
        return _alternate(args, root, env, connect)
    finally:
        if server is not None:
            server.stop()


def _alternate(args: argparse.Namespace, root: Path, env: dict[str, str], connect: bool) -> list[dict[str, Any]]:
    base = export_package(args.revision, root / "base")
    sides = {"base": {**env, "PYTHONPATH": os.pathsep.join([str(base), env["PYTHONPATH"]])}, "tree": env}
    rows = int(float(args.rows))
    sql = root / "select.sql"
    sql.write_text(bench.SELECT.format(rows=rows))
    prefix = f"{bench.database_of(args.approach)}.s{rows}_"
    (bench.reset_connect_tables if connect else bench.reset_tables)(env, f"s{rows}_")
    replaced = bench.REPLACING.get(args.approach)
    if replaced is not None:  # every run replaces the one seeded table, as in the benchmark
        bench.run_one(root, env, replaced[1], prefix + replaced[0], sql)
    runs: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for side, side_env in sides.items():
            target = prefix + (replaced[0] if replaced else f"{args.approach}_{side}_{round_}")
            result = bench.run_one(root, side_env, args.approach, target, sql)
            run = {"side": side, "round": round_, "wall": result["wall_seconds"], **result.get("phases", {})}
            runs.append(run)
            print(json.dumps(run), flush=True)
    return runs


def report(runs: list[dict[str, Any]], revision: str) -> str:
    columns = ["wall", *[p for p in bench.PHASES if any(p in r for r in runs)]]
    lines = [f"| side | runs | {' | '.join(columns)} (medians, s) |", "|---|---:|" + "---:|" * len(columns)]
    for side, label in (("base", revision), ("tree", "this tree")):
        mine = [r for r in runs if r["side"] == side]
        medians = [f"{statistics.median(r[c] for r in mine if c in r):.2f}" for c in columns]
        lines.append(f"| {label} | {len(mine)} | {' | '.join(medians)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", help="the revision to compare this tree with, e.g. HEAD or main~1")
    parser.add_argument("--approach", choices=list(bench.APPROACHES), default="atomic_replace_flip")
    parser.add_argument("--rows", default="1e6")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--root", type=Path, default=REPO / ".ctas-local" / "ab")
    args = parser.parse_args(argv)
    if not args.approach.startswith(("atomic_", "connect_")) or args.approach.startswith("connect_plain"):
        parser.error("compare an atomic approach on the embedded default (atomic_*) or over Spark Connect (connect_*)")
    os.environ.pop("SPARK_SUBMIT_OPTS", None)
    print(report(measure(args), args.revision))
    return 0


if __name__ == "__main__":
    sys.exit(main())
