#!/usr/bin/env bash
# Set up (with the benchmark's plotting dependency), then run the side-by-side benchmark.
# Arguments go to ctas_benchmark.py; without any it runs 1e6, 1e7 and 1e8 rows, 3 repeats.
# With --backfill first, the rest go to backfill_throughput.py (the realistic stack; starts
# PostgreSQL like the tests do). With --profile first, profile_phases.py: one run per approach under py-spy.
# With --ab <revision> first, ab_phases.py: one approach's phases, this tree against that revision, alternately.
# With --compare <before.md> <after.md> first, phases_compared.py: two reports' phases side by side, as a section.
# With --floor first, replace_floor.py: the least a same-shape replace costs over a plain CTAS, in a fresh driver.
# With --durable first, durable_retry.py: the retry after a lost worker, recomputed vs adopted (durable=True).
# With --metastore-calls first, metastore_calls.py: the metastore calls per publish against the plain statement's.
# Reports go to build/reports/ (benchmarks.md + .png, or formats.md + .png for the iceberg_*/delta_* approaches;
# profile.md; metastore-calls.md), each with a history marker; --ab and --floor print. bash scripts/publish_reports.sh publishes them
# into docs/ with their history tables.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The docs group too: setup.sh installs it, and a sync without it would remove mkdocs from the venv.
UV_PYTHON_DOWNLOADS=never python3 -m uv sync --frozen --python python3.11 --quiet --group docs --group bench
export PATH="$PWD/.venv/bin:$PATH"
# The backfill's Airflow and the metastore-calls run's metastore (unless --metastore derby) keep
# their state in PostgreSQL, as the tests do: the one on 5432, or a private one for this run.
if [ "${1:-}" = --backfill ] || { [ "${1:-}" = --metastore-calls ] && [[ " $* " != *" derby "* ]]; }; then
  if [ "$(bash scripts/postgres.sh start)" = started ]; then
    trap 'bash scripts/postgres.sh stop >/dev/null' EXIT
  fi
fi
if [ "${1:-}" = --backfill ]; then
  shift
  python benchmarks/backfill_throughput.py "$@"
elif [ "${1:-}" = --ab ]; then
  shift
  exec python benchmarks/ab_phases.py "$@"
elif [ "${1:-}" = --compare ]; then
  shift
  exec python benchmarks/phases_compared.py "$@"
elif [ "${1:-}" = --durable ]; then
  shift
  exec python benchmarks/durable_retry.py "$@"
elif [ "${1:-}" = --metastore-calls ]; then
  shift
  python benchmarks/metastore_calls.py "$@"
elif [ "${1:-}" = --floor ]; then
  shift
  exec python benchmarks/replace_floor.py "$@"
elif [ "${1:-}" = --profile ]; then
  shift
  exec python benchmarks/profile_phases.py "$@"
else
  exec python benchmarks/ctas_benchmark.py "$@"
fi
