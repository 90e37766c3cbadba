#!/usr/bin/env bash
# Set up, then run the example DAG on the embedded default: local Spark, Spark's embedded Derby
# metastore, Airflow on SQLite. Everything lives under .ctas-local/; delete it to start over.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

LOCAL="$PWD/.ctas-local"
rm -rf "$LOCAL"  # a fresh sandbox each run: `airflow dags test` starts a new run, i.e. a new transaction
export PATH="$PWD/.venv/bin:$PATH"   # spark-submit and spark-sql from pyspark
export AIRFLOW_HOME="$LOCAL/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/example_dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export SPARK_CONF_DIR="$LOCAL/spark-conf"
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}'
LOGICAL_DATE="${1:-2024-01-01}"

python -m ctas_devstack.metastore embedded --root "$LOCAL" --spark-conf-dir "$SPARK_CONF_DIR"
airflow db migrate >"$LOCAL/db-migrate.log" 2>&1
airflow dags test example_atomic_ctas "$LOGICAL_DATE" >"$LOCAL/dags-test.log" 2>&1 || {
  echo "quickstart: the DAG run failed; see $LOCAL/dags-test.log"; exit 1; }
grep -E "\[airflow-ctas\]|begin: ok|run: |finalize: |published " "$LOCAL/dags-test.log" \
  | grep -v AIRFLOW_CTAS_RESULT | sed -E 's/^.*\] (\[airflow-ctas\]|begin|run|finalize|published)/\1/; s/ \[airflow\.task.*$//'
python scripts/show_table.py "analytics.daily_orders_${LOGICAL_DATE//-/}"
