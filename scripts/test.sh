#!/usr/bin/env bash
# Set up, then the fast gate (lint, format, types, import contracts, the docs site, every unit test:
# no JVM, about two minutes), then every real-process test (real Spark, Airflow, metastore, S3,
# Connect). The first failure stops the run. Extra arguments go to the second pytest instead of its
# default lanes, e.g.
#   bash scripts/test.sh -m formats              one lane (lanes: docs/contributing.md)
#   bash scripts/test.sh tests/integration/test_flip.py
# Reports of the run (per-test durations, JUnit XML, the fault matrix) go to build/reports/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
mkdir -p build/reports .ctas-local

gate_started=$SECONDS
ruff check .
ruff format --check .
mypy
lint-imports
# The docs site (mkdocs.yml) into build/site; a warning (a broken link, a missing page) fails it. Not
# --quiet, which hides warnings from --strict too (mkdocs issue 4126): the log is shown on failure only.
docs_log=$(NO_MKDOCS_2_WARNING=1 mkdocs build --strict 2>&1) || { echo "$docs_log" >&2; exit 1; }
pytest -m unit --junitxml=build/reports/junit-unit.xml
echo "test.sh: the fast gate passed in $((SECONDS - gate_started)) s"

# The scheduler tests keep Airflow's metadata in PostgreSQL: use the one on 5432 or start a private one.
if [ "$(bash scripts/postgres.sh start)" = started ]; then
  trap 'bash scripts/postgres.sh stop >/dev/null' EXIT
fi
# The tests' class-data-sharing archive of Spark's classes (tests/support/jvm.py); pytest's fixtures
# wait for it (and make it themselves if this did not).
python -m tests.support.jvm > .ctas-local/cds.log 2>&1 &
if [ "$#" -eq 0 ]; then
  set -- -m "not unit and not bench"  # bench: contributor tooling, run by bash scripts/test.sh -m bench
fi
pytest --junitxml=build/reports/junit-integration.xml "$@"
