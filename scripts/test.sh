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

# The tests' class-data-sharing archives of Spark's classes (tests/support/jvm.py: the main pyspark's,
# then that of the release the Iceberg and Delta drivers run on); pytest's fixtures wait for them (and
# make them themselves if this did not). Made beside the gate, at the lowest priority: after it, the
# first tests of both workers waited about two minutes for them.
nice -n 19 python -m tests.support.jvm > .ctas-local/cds.log 2>&1 &

gate_started=$SECONDS
ruff check .
ruff format --check .
# Types, the import contracts and the docs site (mkdocs.yml, into build/site) each use one core: run
# side by side, each log shown when it fails. The docs build is --strict (a broken link, a missing
# page fails it), not --quiet, which hides --strict's warnings too (mkdocs issue 4126).
NO_MKDOCS_2_WARNING=1 mkdocs build --strict > build/reports/gate-mkdocs.log 2>&1 &
docs_pid=$!
lint-imports > build/reports/gate-lint-imports.log 2>&1 &
imports_pid=$!
mypy > build/reports/gate-mypy.log 2>&1 &
mypy_pid=$!
gate_failed=0
for check in "mypy $mypy_pid" "lint-imports $imports_pid" "mkdocs $docs_pid"; do
  if ! wait "${check#* }"; then
    echo "test.sh: ${check% *} failed:" >&2
    cat "build/reports/gate-${check% *}.log" >&2
    gate_failed=1
  fi
done
[ "$gate_failed" = 0 ] || exit 1
pytest -m unit --junitxml=build/reports/junit-unit.xml
echo "test.sh: the fast gate passed in $((SECONDS - gate_started)) s"

# The scheduler tests keep Airflow's metadata in PostgreSQL: use the one on 5432 or start a private one.
if [ "$(bash scripts/postgres.sh start)" = started ]; then
  trap 'bash scripts/postgres.sh stop >/dev/null' EXIT
fi
# The YARN tests run their cluster in a network of its own (ctas_devstack/netns.py): iproute2, nftables.
if ! command -v nft >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  echo "test.sh: installing iproute2 and nftables (the YARN cluster's own network)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 nftables >/dev/null
fi
if [ "$#" -eq 0 ]; then
  set -- -m "not unit and not bench"  # bench: contributor tooling, run by bash scripts/test.sh -m bench
fi
pytest --junitxml=build/reports/junit-integration.xml "$@"
