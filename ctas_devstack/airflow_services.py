"""Airflow's own services for a realistic local run: a PostgreSQL metadata database, the API server,
the scheduler with LocalExecutor and the DAG processor, so DAG runs and backfills really execute in
parallel (SQLite, the quickstart's database, allows one writer and the SequentialExecutor only).

    python -m ctas_devstack.airflow_services start --root .ctas-local/airflow-pg \\
        --dags-folder example_dags --database ctas_airflow
    python -m ctas_devstack.airflow_services stop --root .ctas-local/airflow-pg

Services inherit this process's environment (SPARK_CONF_DIR, AIRFLOW_CONN_* ...).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ctas_devstack.metastore import free_port, stop_pid_files, wait_for_port
from ctas_devstack.postgres import create_database

SERVICES = ("api-server", "scheduler", "dag-processor")


class AirflowServices:
    def __init__(
        self, root: Path, sql_alchemy_conn: str, dags_folder: Path, extra_env: Mapping[str, str] | None = None
    ) -> None:
        self.root = root.resolve()
        self.sql_alchemy_conn = sql_alchemy_conn
        self.dags_folder = dags_folder.resolve()
        self.extra_env = dict(extra_env or {})
        settings = self.root / "services.json"
        saved = json.loads(settings.read_text()) if settings.exists() else {}
        self.api_port = int(saved.get("api_port") or free_port())
        self.secret = str(saved.get("secret") or secrets.token_hex(16))

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.settings()}

    def settings(self) -> dict[str, str]:
        """What differs from the caller's environment; ``env.sh`` exports it for a user's shell."""
        return {
            "AIRFLOW_HOME": str(self.root),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.sql_alchemy_conn,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.api_port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": self.secret,
            "AIRFLOW__API_AUTH__JWT_SECRET": self.secret,
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            **self.extra_env,
        }

    def airflow(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run an ``airflow`` CLI command against these services' database."""
        return subprocess.run(
            [sys.executable, "-m", "airflow", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )

    def reserialize(self, attempts: int = 3) -> None:
        """Parse the DAG folder into the database now. The running dag processor may be writing the
        same DAGs' rows at that moment, and the command then fails (seen once in CI: exit 1 while
        the processor created them), so it is tried again; the last failure says why."""
        for attempt in range(1, attempts + 1):
            try:
                self.airflow("dags", "reserialize")
                return
            except subprocess.CalledProcessError as exc:
                if attempt == attempts:
                    why = exc.stderr[-3000:]
                    raise RuntimeError(f"airflow dags reserialize failed {attempts} times: {why}") from exc
                time.sleep(2)

    def start(self, timeout: float = 180) -> AirflowServices:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "services.json").write_text(json.dumps({"api_port": self.api_port, "secret": self.secret}))
        exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in self.settings().items())
        (self.root / "env.sh").write_text(exports)
        self.airflow("db", "migrate")
        for service in SERVICES:
            log = open(self.root / f"{service}.log", "ab")  # noqa: SIM115 - handed to the child process
            process = subprocess.Popen(
                [sys.executable, "-m", "airflow", service],
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.root,
            )
            (self.root / f"{service}.pid").write_text(str(process.pid))
            if service == "api-server":
                wait_for_port(self.api_port, timeout, process)
        return self

    def stop(self, grace: float = 20) -> None:
        stop_pid_files([self.root / f"{service}.pid" for service in reversed(SERVICES)], grace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--root", type=Path, default=Path(".ctas-local/airflow-pg"))
    parser.add_argument("--dags-folder", type=Path, default=Path("example_dags"))
    parser.add_argument("--database", default="ctas_airflow", help="PostgreSQL database on 127.0.0.1:5432")
    args = parser.parse_args(argv)
    if args.action == "stop":
        AirflowServices(args.root, "", args.dags_folder).stop()
        return 0
    services = AirflowServices(args.root, create_database(args.database), args.dags_folder).start()
    print(f"Airflow API server on http://127.0.0.1:{services.api_port}; AIRFLOW_HOME={services.root}")
    print(f"for the airflow CLI against these services: source {services.root / 'env.sh'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
