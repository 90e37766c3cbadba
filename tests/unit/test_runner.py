"""The runner's own logic (what it hands to SparkSubmitHook); Spark itself is exercised end to end."""

from __future__ import annotations

import json
import logging
import zipfile
from typing import ClassVar

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.runners import spark_submit
from airflow_provider_ctas.runners.coordinator import CommitCoordinator
from airflow_provider_ctas.spark.protocol import GC_PHASES, RUN_PHASES, PhaseRequest, PhaseResult, Reached


class RecordingHook:
    """Stands in for SparkSubmitHook: records what it was given and answers like a finished driver."""

    calls: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self._connection = {"master": "local[2]", "deploy_mode": None}
        self._should_track_driver_status = False

    def submit(self, application, **popen_kwargs):
        request_path = self.kwargs["application_args"][0]
        with open(request_path) as handle:
            request = json.load(handle)
        archive = zipfile.ZipFile(self.kwargs["py_files"].split(",")[-1])
        RecordingHook.calls.append(
            {
                "application": application,
                "request": request,
                "popen": popen_kwargs,
                "zip": archive.namelist(),
                **self.kwargs,
            }
        )
        with open(request["result_path"], "w") as handle:
            handle.write(PhaseResult(ok=True, reached=Reached.COMMITTED, outcome="published").to_json())


@pytest.fixture
def hook(monkeypatch):
    RecordingHook.calls = []
    monkeypatch.setattr(spark_submit, "SparkSubmitHook", RecordingHook)
    return RecordingHook


@pytest.mark.parametrize(
    "request_",
    [
        PhaseRequest(phases=RUN_PHASES, table={"k": 1}, sql="SELECT 1", faults={"x": {"sleep": 1}}),
        PhaseRequest(phases=GC_PHASES, table={}, gc={"databases": ["db"], "min_age_seconds": 0, "dry_run": True}),
    ],
)
def test_request_file_carries_every_field(hook, request_):
    runner = spark_submit.SparkSubmitRunner(
        conn_id="spark_default", conf={"a": 1}, submit_options={"driver_memory": "2g"}
    )
    publishes = "commit" in request_.phases
    coordinator = CommitCoordinator("t" * 32, 1, logging.getLogger("test"))
    result = runner.run(request_, name="n", coordinator=coordinator if publishes else None)
    assert result.ok and result.outcome == "published"
    (call,) = hook.calls
    sent = PhaseRequest.from_json(json.dumps(call["request"]))
    # The listener's port, bound while the run lasted; the key that seals the handshake.
    settings = {**coordinator.settings(), "port": call["request"]["coordinator"]["port"]} if publishes else None
    assert settings is None or (settings["port"] > 0 and settings["key"] == coordinator.key)
    expected = {"result_path": call["request"]["result_path"], "coordinator": settings}
    assert sent == PhaseRequest(**{**vars(request_), **expected})
    assert call["application"].endswith("airflow_provider_ctas/driver/airflow_ctas_app.py")
    assert "airflow_provider_ctas/driver/app.py" in call["zip"]
    assert call["driver_memory"] == "2g" and call["conf"]["a"] == "1"
    assert call["conf"]["spark.pyspark.driver.python"].endswith("python")
    assert call["popen"] == {}


def test_a_publishing_run_is_decided_by_this_task(hook):
    """Without a coordinator given, the runner makes one for the request's transaction and try: the
    driver learns where to ask, with that try's key, and publishes only on this process's word."""
    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"), conn_id="spark_default", target="db.t", mode="create", table_format="parquet"
    )
    table.begin(3, "2024-01-01T00:00:00+00:00")
    runner = spark_submit.SparkSubmitRunner(conn_id="spark_default", conf=None, submit_options=None)
    runner.run(PhaseRequest(phases=RUN_PHASES, table=table.to_dict(), sql="SELECT 1"), name="n")
    settings = hook.calls[0]["request"]["coordinator"]
    assert settings["address"] == "127.0.0.1" and settings["port"] > 0 and len(settings["key"]) >= 32
    hook.calls.clear()
    with pytest.raises(CorruptStateError):  # a publishing run names its transaction
        runner.run(PhaseRequest(phases=RUN_PHASES, table={}, sql="SELECT 1"), name="n")
    clustered = spark_submit.SparkSubmitRunner(
        conn_id="spark_default", conf=None, submit_options={"deploy_mode": "cluster"}
    )
    coordinator = CommitCoordinator("t" * 32, 1, logging.getLogger("test"))
    with pytest.raises(InvalidInputError, match="deploy mode 'cluster' is not supported"):
        clustered.run(PhaseRequest(phases=RUN_PHASES, table={}, sql="SELECT 1"), name="n", coordinator=coordinator)
    assert hook.calls == []


def test_detached_runs_get_their_own_session(hook):
    runner = spark_submit.SparkSubmitRunner(conn_id="spark_default", conf=None, submit_options=None)
    runner.run(PhaseRequest(phases=("abort",), table={}), name="n", detach=True)
    assert hook.calls[0]["popen"] == {"start_new_session": True}


def test_submit_options_are_an_allowlist():
    with pytest.raises(InvalidInputError, match="unsupported keys"):
        spark_submit.validate_submit_options({"post_submit_commands": ["rm -rf /"]})
    assert spark_submit.validate_submit_options({"jars": "a.jar"}) == {"jars": "a.jar"}
