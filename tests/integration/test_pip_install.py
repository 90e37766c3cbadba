"""Installs as users make them: the wheel, installed with plain pip into clean venvs, is a working provider.

The light install brings no pyspark: a worker that talks to Spark Connect gets the Connect client
(``pyspark-client``, pulled by the apache-spark provider) and nothing else, and no distribution's
files are overwritten by another's (every installed file still matches its distribution's RECORD).
The ``spark-submit`` extra adds pyspark, which shares its folder with pyspark-client. The proof that
each works is a real run: ``airflow dags test`` in that venv publishes a table. With the
apache-hive provider added, a table's asset URI is still the one the operator emits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.catalog import count, properties, table_exists
from tests.support.faults import REPO
from tests.support.fixtures import CONNECT_CONN_ID

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.install]

PYSPARK_CLIENT = "pyspark-client"

DAG = """\
import pendulum
from airflow.sdk import DAG

from airflow_provider_ctas.operators import AtomicCtasOperator

with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    AtomicCtasOperator(task_id="ctas", target_table={target!r}, sql="SELECT id FROM range(42)", conn_id={conn!r})
"""

# What every installed file must still be: the RECORD of the distribution that put it there.
VERIFY_RECORDS = """\
import base64, csv, hashlib, json, sys
from importlib import metadata
clobbered = []
for dist in metadata.distributions():
    for entry in dist.files or []:
        if not entry.hash or entry.hash.mode != "sha256":
            continue
        path = entry.locate()
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        if digest != entry.hash.value:
            clobbered.append(f"{dist.metadata['Name']}: {entry}")
names = sorted(d.metadata["Name"].lower() for d in metadata.distributions())
print(json.dumps({"clobbered": clobbered, "installed": names}))
"""


VERSIONS = """\
import json, re
from importlib import metadata
dist = metadata.distribution("pyspark")
text = dist.locate_file("pyspark/version.py").read_text()
print(json.dumps({"pyspark": dist.version, "files": re.search(r"__version__.*?'([^']+)'", text).group(1)}))
"""


# With apache-airflow-providers-apache-hive installed, Airflow uses its hive:// handler (the provider
# whose package name sorts last wins; the install order does not matter), which keeps URIs as written.
BOTH_HIVE_SCHEMES = """\
import json
from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
from airflow.sdk import Asset
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.operators.assets import create_asset

handler = ProvidersManagerTaskRuntime().asset_uri_handlers["hive"]
conf = {"spark.hadoop.hive.metastore.uris": "thrift://Meta.Example:9083"}
op = AtomicCtasOperator(task_id="t", sql="SELECT 1", target_table="Analytics.Daily", conf=conf)
print(json.dumps({
    "handler": f"{handler.__module__}.{handler.__name__}",
    "outlet": op.outlets[0].uri,
    "create_asset": create_asset(database="analytics", table="daily", host="meta.example").uri,
    "written": Asset("hive://meta.example:9083/analytics/daily").uri,
}))
"""


INSTALLED = """\
import json
from importlib import metadata
print(json.dumps({d.metadata["Name"].lower(): d.version for d in metadata.distributions()}))
"""


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, venv: Path | None = None) -> str:
    """Runs a command; a failure says what it printed and, for a command in ``venv``, which of that
    venv's packages resolved to other versions than CI's lock (what an adopter's plain pip got)."""
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env, cwd=cwd)
    if done.returncode != 0:
        drift = f"\npackages not at the lock's versions: {_drift(venv)}" if venv is not None else ""
        raise AssertionError(
            f"{args[:3]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}{drift}"
        )
    return str(done.stdout)


def _drift(venv: Path) -> dict[str, str]:
    """``name: 'venv version (lock version)'`` for every package of ``venv`` that this environment
    (installed from ``uv.lock``) has at another version."""
    done = subprocess.run([str(venv / "bin" / "python"), "-c", INSTALLED], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"(could not list the venv's packages)": done.stderr[-500:]}
    locked = {dist.metadata["Name"].lower(): dist.version for dist in metadata.distributions()}
    theirs: dict[str, str] = json.loads(done.stdout)
    return {
        name: f"{version} (lock {locked[name]})"
        for name, version in sorted(theirs.items())
        if name in locked and locked[name] != version and name != "airflow-provider-ctas"
    }


def _light_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A clean venv with the wheel installed by plain pip as an adopter runs it: no constraints, so
    the newest versions the package's own requirements allow; returns the venv and the wheel."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "pip"), "--disable-pip-version-check"]
    _run([*pip, "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(REPO)])
    (wheel,) = (tmp_path / "dist").glob("airflow_provider_ctas-*.whl")
    _run([*pip, "install", "-q", "--no-compile", str(wheel)], venv=venv)
    return venv, wheel


def _airflow_env(venv: Path, home: Path) -> dict[str, str]:
    """A worker's environment: that venv, its own Airflow home (SQLite), this session's Spark settings
    (metastore service) and connections."""
    passed = ("HOME", "JAVA_HOME", "SPARK_CONF_DIR", "SPARK_SUBMIT_OPTS", "SPARK_DIST_CLASSPATH", "SPARK_DRIVER_MEMORY")
    return {
        **{key: os.environ[key] for key in passed if key in os.environ},
        **{key: value for key, value in os.environ.items() if key.startswith("AIRFLOW_CONN_")},
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }


def test_plain_pip_installs_run_over_connect_and_spark_submit(stack, connect_server, spark, database, tmp_path):
    venv, wheel = _light_venv(tmp_path)
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    connect_target, submit_target = f"{database}.over_connect", f"{database}.over_submit"
    for dag_id, target, conn in (
        ("light", connect_target, CONNECT_CONN_ID),
        ("submit", submit_target, "spark_default"),
    ):
        (home / "dags" / f"{dag_id}.py").write_text(DAG.format(dag_id=dag_id, target=target, conn=conn))
    python, pip, env = str(venv / "bin" / "python"), str(venv / "bin" / "pip"), _airflow_env(venv, home)
    airflow = str(venv / "bin" / "airflow")

    # The light install: no pyspark, the Connect client only, nothing overwritten; a working provider.
    _run([pip, "check"], venv=venv)
    report = json.loads(_run([python, "-c", VERIFY_RECORDS], venv=venv))
    assert report["clobbered"] == []
    assert "pyspark" not in report["installed"], "the light install brings no pyspark (jars: ~460 MB)"
    assert PYSPARK_CLIENT in report["installed"]
    (provider,) = json.loads(
        _run([airflow, "providers", "get", "airflow-provider-ctas", "--full", "-o", "json"], env=env, venv=venv)
    )
    assert provider["package-name"] == "airflow-provider-ctas"
    assert provider["documentation-url"].startswith("https://")
    _run([airflow, "db", "migrate"], env=env, venv=venv)
    _run([airflow, "dags", "test", "light"], env=env, cwd=tmp_path, venv=venv)
    assert count(spark, connect_target) == 42
    assert properties(spark, connect_target)["airflow_ctas.dag_id"] == "light"

    # The spark-submit extra. pyspark-client (required by the apache-spark provider) shares pyspark's
    # folder; a fresh install of the extra with plain pip writes the client's files last (measured,
    # docs/design.md). pip reproduces that here by installing the client again over pyspark. Such a
    # worker is refused before any spark-submit, with the command that repairs it; repaired, it publishes.
    _run([pip, "install", "-q", "--no-compile", f"{wheel}[spark-submit]"], venv=venv)
    _run([pip, "install", "-q", "--no-compile", "--force-reinstall", "--no-deps", PYSPARK_CLIENT])
    versions = json.loads(_run([python, "-c", VERSIONS], venv=venv))
    assert versions["files"] != versions["pyspark"], versions
    submit = [airflow, "dags", "test", "submit"]
    refused = subprocess.run(submit, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    log = refused.stdout + refused.stderr
    assert "[PYSPARK_INSTALL_MIXED]" in log, log[-3000:]
    assert "Spark-Submit cmd" not in log, "refused before spark-submit ran"
    assert not table_exists(spark, submit_target)
    repair = f"pip install --force-reinstall --no-deps 'pyspark=={versions['pyspark']}'"
    assert repair in log
    _run(
        [pip, "install", "-q", "--no-compile", "--force-reinstall", "--no-deps", f"pyspark=={versions['pyspark']}"],
        venv=venv,
    )
    _run(submit, env=env, cwd=tmp_path, venv=venv)
    assert count(spark, submit_target) == 42
    overlap = json.loads(_run([python, "-c", VERIFY_RECORDS], venv=venv))["clobbered"]
    assert all(entry.startswith("pyspark-client: pyspark/") for entry in overlap), overlap

    # Beside the apache-hive provider, whose hive:// handler Airflow then uses: a table's asset is the
    # same URI as the operator's outlet and events, so downstream schedules still match.
    _run([pip, "install", "-q", "--no-compile", "apache-airflow-providers-apache-hive"], venv=venv)
    both = json.loads(_run([python, "-c", BOTH_HIVE_SCHEMES], env=env, venv=venv))
    assert both.pop("handler") == "airflow.providers.apache.hive.assets.hive.sanitize_uri"
    assert set(both.values()) == {"hive://meta.example:9083/analytics/daily"}, both
