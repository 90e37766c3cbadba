#!/usr/bin/env bash
# Set up, then run lint, type checks and the whole test suite (unit and integration; real Spark
# and Airflow). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# The scheduler tests keep Airflow's metadata in PostgreSQL: use the one on 5432 or start a private one.
if [ "$(bash scripts/postgres.sh start)" = started ]; then
  trap 'bash scripts/postgres.sh stop >/dev/null' EXIT
fi
# The tests' class-data-sharing archive of Spark's classes (tests/support/jvm.py) is made while the
# checks run; pytest's fixtures wait for it (and make it themselves if this did not).
mkdir -p .ctas-local
python -m tests.support.jvm > .ctas-local/cds.log 2>&1 &
archive=$!
ruff check .
ruff format --check .
mypy
lint-imports
wait "$archive" || true
pytest "$@"
