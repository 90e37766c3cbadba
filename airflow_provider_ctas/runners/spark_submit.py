"""Runs phase requests in Spark through the apache-spark provider's ``SparkSubmitHook``.

The hook builds the spark-submit command line, handles every master and deploy mode, and kills
the application; this module only prepares what the packaged application needs (a request file,
the package as a zip for ``--py-files``) and reads the result back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import logging
import marshal
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

import airflow_provider_ctas
from airflow_provider_ctas.catalogs import load_two_phase_table
from airflow_provider_ctas.core.errors import (
    CoordinatorLostError,
    CorruptStateError,
    DecisionPathError,
    InvalidInputError,
    SparkInstallError,
    SparkJobError,
    SparkNotFoundError,
)
from airflow_provider_ctas.core.protocol import PhaseRequest, PhaseResult, Reached, error_info
from airflow_provider_ctas.runners import Logger
from airflow_provider_ctas.runners.coordinator import CommitCoordinator
from airflow_provider_ctas.runners.pyspark_install import check_pyspark_install
from airflow_provider_ctas.runners.yarn_driver import ENDED, application_tags, locate_driver, wait_for_earlier_tries

APPLICATION = str(Path(airflow_provider_ctas.__file__).parent / "driver" / "airflow_ctas_app.py")

# SparkSubmitHook arguments a DAG author may set; the rest (application, its arguments, name,
# java_class, post-submit shell commands) belong to this provider.
ALLOWED_SUBMIT_OPTIONS = frozenset(
    {
        "files",
        "py_files",
        "archives",
        "driver_class_path",
        "jars",
        "packages",
        "exclude_packages",
        "repositories",
        "total_executor_cores",
        "executor_cores",
        "executor_memory",
        "driver_memory",
        "keytab",
        "principal",
        "proxy_user",
        "num_executors",
        "status_poll_interval",
        "env_vars",
        "verbose",
        "spark_binary",
        "properties_file",
        "yarn_queue",
        "deploy_mode",
        "use_krb5ccache",
    }
)

# Defaults that keep the task log readable; a user's own conf wins.
DEFAULT_CONF = {"spark.log.level": "WARN", "spark.ui.showConsoleProgress": "false"}
# A publishing run in YARN cluster mode: spark-submit returns once YARN accepted the application (the
# worker holds no submit JVM; the ResourceManager is followed instead), and there is one driver per
# try: a second application attempt would be a second, unannounced driver for the same try.
YARN_CLUSTER_CONF = {"spark.yarn.submit.waitAppCompletion": "false", "spark.yarn.maxAppAttempts": "1"}
APPLICATION_END_SECONDS = 120.0
"""How long a cluster-mode run follows its application after the driver sent its result."""


def validate_submit_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    options = dict(options or {})
    unknown = sorted(set(options) - ALLOWED_SUBMIT_OPTIONS)
    if unknown:
        raise InvalidInputError(
            f"spark_submit_options has unsupported keys {unknown}; allowed: {', '.join(sorted(ALLOWED_SUBMIT_OPTIONS))}"
        )
    return options


WORKDIR_PREFIX = "airflow-ctas-"
STALE_WORKDIR_SECONDS = 86400
PACKAGE_CACHE_PREFIX = "airflow_ctas_py_files-"
"""Not a WORKDIR_PREFIX: a driver may be reading a zip from there while another task sweeps."""


def sweep_stale_workdirs(now: float | None = None) -> list[str]:
    """Remove this user's submission folders left by tries that were killed before they could clean up
    (a SIGKILLed task runs no ``finally``): older than a day, so never one a live task still uses."""
    now = time.time() if now is None else now
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        try:
            stat = path.stat()
        except OSError:
            continue
        if path.is_dir() and stat.st_uid == os.getuid() and now - stat.st_mtime > STALE_WORKDIR_SECONDS:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def package_zip(directory: str) -> str:
    """This package as a zip for ``--py-files``, so a cluster-mode driver runs the same code as the worker.

    Each module goes with its compiled form for this Python: a driver on the same Python imports
    it without compiling (85 ms of every run's critical path, measured), one on another Python falls
    back to the source (zipimport checks the magic number, the source's time and size). Built once
    per package content and Python in a folder only this user can write, since the driver runs what
    it holds; in ``directory`` when that folder is not safe."""
    root = Path(airflow_provider_ctas.__file__).parent
    sources = sorted(root.rglob("*.py"))
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for path in sources:
        stat = path.stat()
        key.update(f"{path.relative_to(root)}:{stat.st_mtime_ns}:{stat.st_size};".encode())
    cache = _private_folder(Path(tempfile.gettempdir()) / f"{PACKAGE_CACHE_PREFIX}{os.getuid()}")
    target = (cache or Path(directory)) / f"airflow_provider_ctas-{key.hexdigest()[:20]}.zip"
    if not target.exists():
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        _write_package(partial, target, root, sources)
        os.replace(partial, target)  # a concurrent task sees the whole zip or none
    return str(target)


def _private_folder(path: Path) -> Path | None:
    """``path``, made if missing, when it is this user's and nobody else can write into it."""
    with contextlib.suppress(OSError):  # exists, or cannot be made: the checks below decide
        path.mkdir(mode=0o700)
    try:
        stat = path.lstat()
    except OSError:
        return None
    private = path.is_dir() and not path.is_symlink() and stat.st_uid == os.getuid() and not stat.st_mode & 0o022
    return path if private else None


def _write_package(partial: Path, target: Path, root: Path, sources: list[Path]) -> None:
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sources:
            name = Path("airflow_provider_ctas") / path.relative_to(root)
            archive.write(path, name)
            source, stat = path.read_bytes(), path.stat()
            code = compile(source, str(target / name), "exec", dont_inherit=True)  # as zipimport names it
            # A timestamp-based .pyc (PEP 552): magic, flags 0, the source's mtime and size, the code.
            header = importlib.util.MAGIC_NUMBER + b"\0\0\0\0"
            header += (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            header += (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
            archive.writestr(str(name.with_suffix(".pyc")), header + marshal.dumps(code))


class SparkSubmitRunner:
    def __init__(
        self,
        *,
        conn_id: str,
        conf: Mapping[str, Any] | None,
        submit_options: Mapping[str, Any] | None,
        log: Logger | None = None,
    ) -> None:
        self.conn_id = conn_id
        self.log: Logger = log or logging.getLogger(__name__)
        self.conf = {str(k): str(v) for k, v in (conf or {}).items()}
        self.submit_options = validate_submit_options(submit_options)
        self._hook: SparkSubmitHook | None = None
        self._coordinator: CommitCoordinator | None = None

    def _effective_conf(self) -> dict[str, str]:
        conf = {**DEFAULT_CONF, **self.conf}
        master = str(SparkSubmitHook(conn_id=self.conn_id)._connection["master"])
        if master.startswith("local"):
            # The driver and its Python workers run here: use this interpreter, which has pyspark.
            conf.setdefault("spark.pyspark.python", sys.executable)
            conf.setdefault("spark.pyspark.driver.python", sys.executable)
        return conf

    def run(
        self,
        request: PhaseRequest,
        *,
        name: str,
        detach: bool = False,
        coordinator: CommitCoordinator | None = None,
    ) -> PhaseResult:
        """Submit the application for ``request``; never raises for a failed Spark run.

        ``detach`` starts spark-submit in its own session so it outlives this process, for an
        abort started from ``on_kill`` (Airflow SIGKILLs the task's process group 5 s later).
        A run that publishes gets a coordinator (or ``coordinator``, when given) that answers the
        driver's commit question from this process: the driver publishes only on the task's word
        (FLIP-305: the job-status hook decides).
        """
        if "commit" in request.phases:
            in_cluster = self._driver_in_cluster()
            if coordinator is None:
                table = load_two_phase_table(request.table)
                coordinator = CommitCoordinator(
                    table.txn_id, table.try_number, self.log, driver_listens=in_cluster, faults=request.faults
                )
        sweep_stale_workdirs()
        workdir = tempfile.mkdtemp(prefix=WORKDIR_PREFIX)
        try:
            with coordinator or contextlib.nullcontext():
                self._coordinator = coordinator
                return self._submit_request(request, name, detach, workdir, coordinator)
        finally:
            self._hook = None
            self._coordinator = None
            shutil.rmtree(workdir, ignore_errors=True)

    def _driver_in_cluster(self) -> bool:
        """Whether a publishing run's driver runs in the cluster: on YARN, where the task reaches it
        through the ResourceManager (``runners/yarn_driver.py``); refused on other masters."""
        hook = SparkSubmitHook(conn_id=self.conn_id, deploy_mode=self.submit_options.get("deploy_mode"))
        if hook._connection["deploy_mode"] != "cluster":
            return False
        if not hook._is_yarn:
            raise InvalidInputError(
                "deploy mode 'cluster' is supported on YARN only (Kubernetes: designed, not tested; a standalone "
                "master runs no Python application in cluster mode); use client mode or a spark_connect connection"
            )
        try:
            hook._get_yarn_rm_base_url()
        except ValueError as exc:
            raise InvalidInputError(
                f"deploy mode 'cluster' on YARN needs the ResourceManager's web address, through which the task "
                f"finds its driver to decide the commit: set yarn_resourcemanager_webapp_address (e.g. "
                f"http://rm:8088) in the extra of connection {self.conn_id!r}"
            ) from exc
        return True

    def _submit_request(
        self, request: PhaseRequest, name: str, detach: bool, workdir: str, coordinator: CommitCoordinator | None
    ) -> PhaseResult:
        request_path = os.path.join(workdir, "request.json")
        result_path = os.path.join(workdir, "result.json")
        sent = dataclasses.replace(
            request, result_path=result_path, coordinator=coordinator.settings() if coordinator else None
        )
        # 0600: the request carries the handshake key.
        with open(os.open(request_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write(sent.to_json())
        options = dict(self.submit_options)
        options["files"] = ",".join(filter(None, [options.get("files"), request_path]))
        options["py_files"] = ",".join(filter(None, [options.get("py_files"), package_zip(workdir)]))
        # The driver runs in the cluster and waits for this task's connection (``yarn_driver.py``).
        cluster = coordinator if coordinator is not None and coordinator.driver_listens else None
        cluster_conf: dict[str, str] = {}
        if cluster is not None:
            tags = application_tags(cluster.txn_id, cluster.try_number)
            cluster_conf = {**YARN_CLUSTER_CONF, "spark.yarn.tags": tags}
        hook = SparkSubmitHook(
            conf={**self._effective_conf(), **cluster_conf},
            conn_id=self.conn_id,
            name=name,
            application_args=[request_path],
            yarn_track_via_rm_api=cluster is not None,
            **options,
        )
        self._hook = hook
        if cluster is not None and request.durable:
            wait_for_earlier_tries(
                hook, cluster.txn_id, cluster.try_number, lambda said: self.log.info("[airflow-ctas] %s", said)
            )
        error = self._submit(hook, detach)
        if error is None and cluster is not None:
            return self._decide_with_driver_in_cluster(hook, cluster)
        return self._read_result(result_path, error)

    def _decide_with_driver_in_cluster(self, hook: SparkSubmitHook, coordinator: CommitCoordinator) -> PhaseResult:
        """Connect to the driver where it announced itself, answer it as in client mode, and follow
        its application to its end; the result comes on the channel. A driver the task cannot reach
        is killed: it waits for the task before writing anything."""
        started = time.monotonic()
        try:
            host, port = locate_driver(hook, coordinator.txn_id, coordinator.try_number, coordinator.accept_seconds)
            try:
                coordinator.connect(host, port)
            except (OSError, CoordinatorLostError) as exc:
                raise DecisionPathError(
                    f"the driver announced {host}:{port}, which did not answer as this try's driver from this "
                    f"worker ({exc}); cluster deploy mode needs the worker to reach the driver's host"
                ) from exc
        except DecisionPathError as exc:
            self.log.warning("[airflow-ctas] decision path: %s; killing the application", exc)
            hook.on_kill()
            return PhaseResult(ok=False, error=error_info(exc.code, str(exc), "submit"))
        self.log.info(
            "[airflow-ctas] decision path: connected to the driver of %s at %s:%s in %.1fs",
            hook._yarn_application_id, host, port, time.monotonic() - started,
        )  # fmt: skip
        state, final, diagnostics = self._follow_application(hook, coordinator)
        if coordinator.result is not None:
            try:
                return PhaseResult.from_json(coordinator.result)
            except CorruptStateError:
                pass
        return PhaseResult(
            ok=False, error=_error(f"YARN application ended {state} ({final}) without a result: {diagnostics}")
        )

    def _follow_application(self, hook: SparkSubmitHook, coordinator: CommitCoordinator) -> tuple[str, str, str]:
        """The application's state until it ends (every second, not the hook's 10 s), bounded once
        the driver has sent its result; a ResourceManager that stops answering ends the wait."""
        app_id, failures = str(hook._yarn_application_id), 0
        after_result: float | None = None
        while True:
            try:
                state, final, diagnostics = hook._query_yarn_application_status(app_id)
                failures = 0
            except RuntimeError as exc:
                failures += 1
                if failures > 10:
                    return "UNKNOWN", "UNKNOWN", str(exc)
                state, final, diagnostics = "UNKNOWN", "UNKNOWN", str(exc)
            if state in ENDED:
                return state, final, diagnostics
            if coordinator.result is not None:
                after_result = after_result or time.monotonic()
                if time.monotonic() - after_result > APPLICATION_END_SECONDS:
                    return state, final, f"still {state} {APPLICATION_END_SECONDS:.0f}s after its result"
            time.sleep(1)

    def _submit(self, hook: SparkSubmitHook, detach: bool) -> dict[str, str] | None:
        try:
            check_pyspark_install()
        except SparkInstallError as exc:
            return error_info(exc.code, str(exc), "submit")
        try:
            if detach:
                hook.submit(APPLICATION, start_new_session=True)
            else:
                hook.submit(APPLICATION)
            if hook._should_track_driver_status:
                # Standalone cluster mode: spark-submit returns once the driver is launched.
                try:
                    hook._start_driver_status_tracking()
                finally:
                    hook._run_post_submit_commands()
                if hook._driver_status != "FINISHED":
                    return _error(f"Spark driver {hook._driver_id} ended with status {hook._driver_status}")
        except FileNotFoundError as exc:
            return error_info(
                SparkNotFoundError.code,
                f"{exc.filename or 'spark-submit'} is not on this worker's PATH; put the bin directory "
                f"of your Spark installation there (for pip-installed pyspark: {sys.prefix}/bin)",
                "submit",
            )
        except Exception as exc:  # noqa: BLE001 - any failure to start spark-submit is a coded result
            return _error(str(exc))
        return None

    @staticmethod
    def _read_result(path: str, error: dict[str, str] | None) -> PhaseResult:
        if os.path.exists(path):
            with open(path) as handle:
                text = handle.read()
            try:
                return PhaseResult.from_json(text)
            except CorruptStateError:
                pass  # a torn or foreign file: fall back to the exit status
        if error is None:
            # Cluster mode: the driver could not write here; its exit status is all we know.
            return PhaseResult(ok=True, reached=Reached.UNKNOWN, details={"result": "exit status only"})
        return PhaseResult(ok=False, error=error)

    def kill(self) -> None:
        if self._coordinator is not None:
            self._coordinator.refuse("the task is being killed")
        hook = self._hook
        if hook is None:
            # An execution_timeout reaches on_kill after run() has unwound.
            self.log.info(
                "[airflow-ctas] on_kill: no Spark run in progress here, nothing to kill (a driver that still"
                " runs ends once it finds this task's channel closed)"
            )
            return
        self.log.info("[airflow-ctas] on_kill: killing the Spark application")
        hook.on_kill()


def _error(message: str) -> dict[str, str]:
    return error_info(SparkJobError.code, message, "submit")


def faults_from_environment() -> dict[str, Any]:
    """Fault injection for this provider's own test suite; unset (and empty) in production."""
    raw = os.environ.get("AIRFLOW_CTAS_FAULTS")
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise InvalidInputError("AIRFLOW_CTAS_FAULTS must be a JSON object")
    return value
