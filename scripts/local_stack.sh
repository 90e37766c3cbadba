#!/usr/bin/env bash
# A realistic local stack, the one the backfill tests use: a Hive Metastore service (Derby, from
# pyspark's jars), a Spark standalone master and worker, and Airflow's API server, scheduler
# (LocalExecutor) and DAG processor on a PostgreSQL database (scripts/postgres.sh: the one on
# 127.0.0.1:5432, or a private one it installs and starts). All bound to 127.0.0.1, all state under
# .ctas-local/stack/.
#
#   bash scripts/local_stack.sh start     # then: source .ctas-local/stack/airflow/env.sh
#   CTAS_STACK_DAGS=~/my_dags bash scripts/local_stack.sh start    # serve your own DAG folder
#   bash scripts/local_stack.sh stop
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD/.ctas-local/stack"
DATABASE="${CTAS_STACK_DATABASE:-ctas_airflow}"
DAGS="$(cd "${CTAS_STACK_DAGS:-example_dags}" && pwd)"

case "${1:-}" in
  start)
    bash scripts/setup.sh
    bash scripts/postgres.sh start >/dev/null
    export PATH="$PWD/.venv/bin:$PATH"
    python -m ctas_devstack.metastore start --root "$ROOT/hms" --port 9083 \
      --spark-conf-dir "$ROOT/spark-conf"
    # Worker cores are scheduling slots: more than the machine has lets parallel runs share it.
    python -m ctas_devstack.cluster start --root "$ROOT/cluster" --port 7077 --cores 8 --memory 6g
    export SPARK_CONF_DIR="$ROOT/spark-conf"
    export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "spark://127.0.0.1:7077"}'
    python -m ctas_devstack.airflow_services start --root "$ROOT/airflow" \
      --dags-folder "$DAGS" --database "$DATABASE"
    {
      echo "export PATH=$PWD/.venv/bin:\$PATH"
      echo "export SPARK_CONF_DIR=$SPARK_CONF_DIR"
      echo "export AIRFLOW_CONN_SPARK_DEFAULT='$AIRFLOW_CONN_SPARK_DEFAULT'"
    } >>"$ROOT/airflow/env.sh"
    echo "stack up; for the airflow CLI: source $ROOT/airflow/env.sh"
    ;;
  stop)
    export PATH="$PWD/.venv/bin:$PATH"
    python -m ctas_devstack.airflow_services stop --root "$ROOT/airflow"
    python -m ctas_devstack.cluster stop --root "$ROOT/cluster"
    python -m ctas_devstack.metastore stop --root "$ROOT/hms"
    bash scripts/postgres.sh stop >/dev/null
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
