#!/usr/bin/env bash
# Set up, then run lint, type checks and the whole test suite (unit and integration; real Spark
# and Airflow). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
ruff format --check .
mypy
pytest "$@"
