#!/usr/bin/env bash
# The chaos soak (tests/soak/test_soak.py): DAG runs of an atomic task whose tries fail as a seed
# draws them, every invariant checked, results in build/reports/soak.md.
#   bash scripts/soak.sh --runs 300 [--seed 42]   N runs (the seed defaults to a random one, printed)
#   bash scripts/soak.sh --replay 1234567         the one run a failure named (or several: 12,34)
#   --formats parquet,iceberg,delta,iceberg-rest  the tables runs draw from (default: parquet); iceberg is
#                                                 on the Hive metastore, iceberg-rest on the Iceberg REST
#                                                 catalog server; a replay takes the --formats its failure printed
#   --metastore postgres|derby                    where the metastore service keeps its state (default:
#                                                 postgres, scripts/postgres.sh's server, as a production
#                                                 metastore's database; derby: the tests' default, on which
#                                                 a partition switch can be listed half applied, counted apart)
#   --cluster local|yarn                          where the drivers run: beside their task (default), or in
#                                                 the dev stack's YARN in cluster deploy mode (parquet only)
#   --storage local|s3                            where the tables live: the local disk (default), or a bucket of
#                                                 the dev stack's S3 server that the drivers reach through a fault
#                                                 proxy, which adds the store going down to the faults (parquet,
#                                                 local drivers)
# Further arguments go to pytest (e.g. -n 1). bash scripts/publish_reports.sh publishes the report.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20
seed=""
replay=""
formats="parquet"
metastore="postgres"
cluster="local"
storage="local"
while [ "$#" -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --replay) replay="$2"; shift 2 ;;
    --formats) formats="$2"; shift 2 ;;
    --metastore) metastore="$2"; shift 2 ;;
    --cluster) cluster="$2"; shift 2 ;;
    --storage) storage="$2"; shift 2 ;;
    *) break ;;
  esac
done
[[ "$runs" =~ ^[0-9]+$ ]] || { echo "soak.sh: --runs takes a number, not '$runs'" >&2; exit 2; }
[ -z "$seed" ] && seed=$(( (RANDOM << 15) | RANDOM ))
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "soak.sh: --seed takes a number, not '$seed'" >&2; exit 2; }
[[ "$formats" =~ ^(parquet|iceberg|delta|iceberg-rest)(,(parquet|iceberg|delta|iceberg-rest))*$ ]] || { echo "soak.sh: --formats takes some of parquet,iceberg,delta,iceberg-rest, not '$formats'" >&2; exit 2; }
[ -z "$replay" ] || [[ "$replay" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "soak.sh: --replay takes run seeds (SEED[,SEED...])" >&2; exit 2; }
[[ "$metastore" =~ ^(derby|postgres)$ ]] || { echo "soak.sh: --metastore takes derby or postgres, not '$metastore'" >&2; exit 2; }
[[ "$cluster" =~ ^(local|yarn)$ ]] || { echo "soak.sh: --cluster takes local or yarn, not '$cluster'" >&2; exit 2; }
[ "$cluster" = local ] || [ "$formats" = parquet ] || { echo "soak.sh: --cluster yarn runs parquet tables only (--formats parquet)" >&2; exit 2; }
[[ "$storage" =~ ^(local|s3)$ ]] || { echo "soak.sh: --storage takes local or s3, not '$storage'" >&2; exit 2; }
[ "$storage" = local ] || { [ "$formats" = parquet ] && [ "$cluster" = local ]; } || { echo "soak.sh: --storage s3 runs parquet tables with local drivers (--formats parquet --cluster local)" >&2; exit 2; }
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
mkdir -p build/reports .ctas-local
export CTAS_SOAK_FORMATS="$formats" CTAS_TEST_METASTORE_DB="$metastore" CTAS_SOAK_CLUSTER="$cluster" CTAS_SOAK_STORAGE="$storage"
if [ "$metastore" = postgres ] && [ "$(bash scripts/postgres.sh start)" = started ]; then
  trap 'bash scripts/postgres.sh stop >/dev/null' EXIT
fi
python -m tests.support.jvm > .ctas-local/cds.log 2>&1 || true
if [ -n "$replay" ]; then
  echo "soak.sh: replaying run $replay"
  export CTAS_SOAK_REPLAY="$replay"
else
  echo "soak.sh: $runs runs of $formats tables from seed $seed (replay all of them: bash scripts/soak.sh --runs $runs --seed $seed --formats $formats --metastore $metastore --cluster $cluster --storage $storage)"
  export CTAS_SOAK_RUNS="$runs" CTAS_SOAK_SEED="$seed"
fi
pytest tests/soak -m soak -p no:randomly "$@"
