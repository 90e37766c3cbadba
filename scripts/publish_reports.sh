#!/usr/bin/env bash
# Copy the last test run's fault matrix (build/reports/reliability.md) into docs/reliability.md, on
# purpose, with a row in its history table. Test runs themselves never write under docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m tests.support.reliability
