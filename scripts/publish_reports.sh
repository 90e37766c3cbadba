#!/usr/bin/env bash
# Publish the reports of the last runs, on purpose: every report under build/reports/ (the fault
# matrix reliability.md; the benchmark's benchmarks.md, or formats.md for the Iceberg/Delta
# approaches, with its plot; profile.md) is copied into docs/ with a row for its run added to the
# history table at its end (ctas_devstack/reports.py). Test and benchmark runs never write under docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m ctas_devstack.reports
