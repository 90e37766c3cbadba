#!/usr/bin/env bash
# Install everything this project needs on a fresh Debian machine with Python 3.11:
# Java 17 (apt-get, only if missing), uv, the locked Python environment in .venv, and the pinned jars
# of scripts/jars.lock (Maven, from apt-get if missing, fetches them once into a cache).
# PostgreSQL, for the scheduler tests and the local stack, is scripts/postgres.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
if ! command -v java >/dev/null 2>&1; then
  echo "setup: installing Java 17 (Spark needs a JVM)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless
fi
if [ "$(python3 -m uv --version 2>/dev/null | awk '{print $2}')" != "$UV_VERSION" ]; then
  echo "setup: installing uv $UV_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
# The lock file pins every package CI tested; --frozen refuses to change it. --compile-bytecode:
# without .pyc files (uv writes none by default; PYTHONDONTWRITEBYTECODE stops Python writing them),
# every Airflow process compiled ~2,000 modules from source, ~6 s of CPU each time.
# --group docs: mkdocs-material, for the documentation site the test command builds.
UV_PYTHON_DOWNLOADS=never python3 -m uv sync --frozen --python python3.11 --group docs --quiet --compile-bytecode
echo "setup: .venv ready ($(.venv/bin/python -c 'import airflow, pyspark; print("airflow", airflow.__version__, "pyspark", pyspark.__version__)'))"
if grep -qvE '^[[:space:]]*(#|$)' scripts/jars.lock && ! command -v mvn >/dev/null 2>&1; then
  echo "setup: installing Maven (fetches the jars of scripts/jars.lock)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven
fi
.venv/bin/python scripts/fetch_jars.py >/dev/null
