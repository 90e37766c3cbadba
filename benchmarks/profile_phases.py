"""Where one atomic run's time goes inside its Spark driver, call by call (issue 21's breakdown).

    bash benchmarks/run.sh --profile [approach ...] [--rows 1e6]

Runs each approach once on the embedded default (``one_run.py``: a one-task DAG run, spark-submit,
Derby metastore; ``connect_*``: over the benchmark's Spark Connect server, where the phases run in the
task process), under py-spy sampling the task and every process it starts, idle time included
(a call waiting on the JVM counts: that is where Spark and the metastore spend it). Reports, per
approach, the wall time each function of the driver's main thread was on the stack (inclusive), so
a phase's seconds split into the catalog calls it made. Python-side only: a JVM-side cost shows as
the Python call that waited for it. Writes build/reports/profile.md, with a history marker (the
run's date, commit and each approach's phases); ``bash scripts/publish_reports.sh`` copies it into
docs/profile.md with its history table (ctas_devstack/reports.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pendulum

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import ctas_benchmark as bench  # noqa: E402 - the harness's environment, query and table reset

from ctas_devstack import reports  # noqa: E402

RATE = 50
"""Samples per second."""
DRIVER_ENTRY = "airflow_ctas_app.py"
CONNECT_ENTRY = "runners/spark_connect.py"
"""Over Spark Connect the phases run in the task process, in the Connect runner's ``run``."""
_FRAME = re.compile(r"(?P<function>.*) \((?P<file>[^()]*?):(?P<line>\d+)\)$")
_PLUMBING = {"java_gateway.py", "clientserver.py", "socket.py", "threading.py", "socketserver.py"}


def driver_profile(raw: Path, entry: str = DRIVER_ENTRY) -> tuple[float, list[tuple[str, float]]]:
    """Seconds on the driver's main thread (from its frame naming ``entry``), and per function the
    seconds it was on its stack."""
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # The last process frame is the innermost process: the driver's Python (spark-submit's
        # command line names the entry script too, so only the innermost counts).
        processes = [i for i, frame in enumerate(frames) if frame.startswith("process ")]
        frames = frames[processes[-1] + 1 :] if processes else frames
        start = next((i for i, frame in enumerate(frames) if entry in frame), None)
        if start is None:
            continue
        frames = frames[start:]
        samples = int(count)
        total += samples
        seen: set[str] = set()
        for frame in frames[1:]:
            match = _FRAME.match(frame)
            if not match or match["file"] in _PLUMBING or match["file"].startswith("<"):
                continue
            key = f"{match['function']} ({Path(match['file']).name})"
            if key not in seen:
                seen.add(key)
                inclusive[key] += samples
    return total / RATE, [(key, n / RATE) for key, n in inclusive.most_common()]


def profile_one(root: Path, env: dict[str, str], approach: str, rows: int) -> dict[str, Any]:
    sql = root / "query.sql"
    sql.write_text(bench.SELECT.format(rows=rows))
    connect = approach.startswith("connect_")
    if connect:
        bench.reset_connect_tables(env, "profiled_")
    else:
        bench.reset_tables(env, "profiled_")
    database = bench.database_of(approach)
    target = f"{database}.profiled_{approach}"
    if approach in bench.REPLACING:  # replacing an existing version, as the benchmark measures it
        name, seeder = bench.REPLACING[approach]
        target = f"{database}.profiled_{name}"
        bench.run_one(root, env, seeder, target, sql)
    elif connect:  # a Connect server that has run nothing yet runs its first statements cold
        bench.run_one(root, env, approach, f"{database}.profiled_warmup", sql)
    raw, result = root / f"{approach}.raw", root / "result.json"
    result.unlink(missing_ok=True)
    py_spy = shutil.which("py-spy", path=env["PATH"])
    if py_spy is None:
        raise SystemExit("py-spy not found: run through benchmarks/run.sh (it installs the bench group)")
    command = [py_spy, "record", "--subprocesses", "--idle", "--rate", str(RATE), "--format", "raw",
               "--output", str(raw), "--", sys.executable, str(HERE / "one_run.py"), approach, target, str(sql),
               str(result)]  # fmt: skip
    subprocess.run(command, env=env, check=True, capture_output=True)
    measured = json.loads(result.read_text())
    seconds, functions = driver_profile(raw, CONNECT_ENTRY if connect else DRIVER_ENTRY)
    return {
        "approach": approach,
        "rows": rows,
        "phases": measured.get("phases", {}),
        "driver_seconds": seconds,
        "functions": functions,
    }


def history_cells(profiles: list[dict[str, Any]], when: str, commit: str) -> list[str]:
    """The profile's history row: date, commit, rows, and per approach its phases and the driver's seconds."""
    phases = [
        f"{p['approach']}: "
        + ", ".join(f"{name} {seconds:.2f}" for name, seconds in p["phases"].items())
        + f"; driver {p['driver_seconds']:.1f}"
        for p in profiles
    ]
    sizes = sorted({int(p["rows"]) for p in profiles})
    return [reports.stamp(when), commit, ", ".join(bench.size_label(n) for n in sizes), "<br>".join(phases)]


def render(profiles: list[dict[str, Any]], shown: int, commit: str = "unknown") -> str:
    when = pendulum.now("UTC").to_iso8601_string()
    lines = [
        "# Profile: where an atomic run's driver spends its time",
        "",
        "Generated by `bash benchmarks/run.sh --profile` (benchmarks/profile_phases.py); do not edit by hand.",
        f"Run {when} on {bench.memory_gib():.0f} GiB, "
        + (
            f"Spark {bench.FORMAT_SPARK} with a metastore service (Iceberg/Delta)"
            if bench.in_format_world([p["approach"] for p in profiles])
            else "the embedded default (spark-submit, local[2], Derby metastore; `connect_*`: over a Spark Connect"
            " server kept up and warmed by an untimed run, the phases in the task process)"
        )
        + f", one run per approach under py-spy at {RATE} samples/s, idle included.",
        "Over Spark Connect the phases run in the task process: its main thread from the Connect runner on",
        "stands for the driver's.",
        "Seconds a function of the driver's main thread was on the stack (inclusive: a phase includes",
        "its calls; a call waiting for the JVM or the metastore includes that wait). The first catalog",
        "call of a driver starts the Hive client and the metastore: a plain CTAS pays that too, in its",
        "statement.",
        "",
    ]
    for profile in profiles:
        phases = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in profile["phases"].items())
        lines += [
            f"## {profile['approach']}, {profile['rows']:.0e} rows",
            "",
            f"Phases as the driver timed them: {phases}; the driver's main thread: {profile['driver_seconds']:.1f} s.",
            "",
            "| seconds | function (file) |",
            "|---:|---|",
            *(f"| {seconds:.2f} | `{name}` |" for name, seconds in profile["functions"][:shown] if seconds >= 0.05),
            "",
        ]
    lines += [reports.marker(reports.PROFILE, history_cells(profiles, when, commit)), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("approaches", nargs="*", default=["atomic_create", "atomic_replace_flip"])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--root", type=Path, default=REPO / ".ctas-local" / "profile")
    parser.add_argument("--out", type=Path, default=reports.PROFILE.report)
    parser.add_argument("--top", type=int, default=45)
    args = parser.parse_args(argv)
    unknown = [
        a
        for a in args.approaches
        if a not in bench.APPROACHES or not a.startswith(("atomic_", "connect_", *bench.FORMATS)) or "plain" in a
    ]
    if unknown:
        parser.error(f"not an atomic approach of ctas_benchmark.py: {unknown}")
    os.environ.pop("SPARK_SUBMIT_OPTS", None)  # Spark's settings are the harness's own, as in ctas_benchmark.py
    root = args.root.resolve()
    env, _ = bench.prepare(root)
    started = list(bench.start_format_world(root, env)) if bench.in_format_world(args.approaches) else []
    if any(a.startswith("connect_") for a in args.approaches):
        started.append(bench.start_connect_server(root, env))
    try:
        profiles = [profile_one(root, env, approach, int(args.rows)) for approach in args.approaches]
    finally:
        for service in started:
            service.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    commit = reports.commit("airflow_provider_ctas", "benchmarks", "ctas_devstack")
    args.out.write_text(render(profiles, args.top, commit))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
