#!/usr/bin/env bash
# PostgreSQL on 127.0.0.1:5432 (trust auth, superuser `postgres`) for Airflow's metadata database in
# the scheduler tests and the local stack. A server that already answers there is used as it is.
# Otherwise a private one runs from .ctas-local/postgres/ (binaries from Debian's packages, installed
# with apt-get only when missing; the cluster is created once and reused).
#
#   bash scripts/postgres.sh start   # prints "started" when this call started it, "running" otherwise
#   bash scripts/postgres.sh stop    # stops the private server only, never one it did not start
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD/.ctas-local/postgres"
DATA="$ROOT/data"
PORT=5432

answers() { (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; }

bindir() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$found" ] && [ -x "$found/postgres" ] && echo "$found"
}

install_binaries() {
  echo "postgres: installing PostgreSQL from Debian's packages" >&2
  # No cluster of the package's own: it would take port 5432 with password auth.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

# PostgreSQL refuses to run as root: as root, the private cluster belongs to the `postgres` user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  if answers; then
    echo running
    return
  fi
  local bin
  bin=$(bindir) || { install_binaries; bin=$(bindir); }
  mkdir -p "$ROOT"
  [ "$(id -u)" = 0 ] && chown postgres: "$ROOT"
  if [ ! -f "$DATA/PG_VERSION" ]; then
    as_owner "$bin/initdb" --pgdata "$DATA" --username postgres --auth trust --encoding UTF8 >"$ROOT/initdb.log"
  fi
  as_owner "$bin/pg_ctl" --pgdata "$DATA" --log "$ROOT/server.log" --wait --timeout 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $ROOT -c max_connections=200 -c fsync=off" start >/dev/null
  echo started
}

stop() {
  local bin
  if [ -f "$DATA/postmaster.pid" ] && bin=$(bindir); then
    as_owner "$bin/pg_ctl" --pgdata "$DATA" --mode fast --wait stop >/dev/null
    echo stopped
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
