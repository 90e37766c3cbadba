"""The runner's own logic (what it hands to SparkSubmitHook); Spark itself is exercised end to end."""

from __future__ import annotations

import json
import zipfile
from typing import ClassVar

import pytest

from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.runners import spark_submit
from airflow_provider_ctas.spark.protocol import GC_PHASES, RUN_PHASES, PhaseRequest


class RecordingHook:
    """Stands in for SparkSubmitHook: records what it was given and answers like a finished driver."""

    calls: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self._connection = {"master": "local[2]"}
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
            handle.write(json.dumps({"ok": True, "reached": "committed", "outcome": "published"}))


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
    result = runner.run(request_, name="n")
    assert result.ok and result.outcome == "published"
    (call,) = hook.calls
    sent = PhaseRequest.from_json(json.dumps(call["request"]))
    assert sent == PhaseRequest(**{**vars(request_), "result_path": call["request"]["result_path"]})
    assert call["application"].endswith("airflow_provider_ctas/spark/airflow_ctas_app.py")
    assert "airflow_provider_ctas/spark/app.py" in call["zip"]
    assert call["driver_memory"] == "2g" and call["conf"]["a"] == "1"
    assert call["conf"]["spark.pyspark.driver.python"].endswith("python")
    assert call["popen"] == {}


def test_detached_runs_get_their_own_session(hook):
    runner = spark_submit.SparkSubmitRunner(conn_id="spark_default", conf=None, submit_options=None)
    runner.run(PhaseRequest(phases=("abort",), table={}), name="n", detach=True)
    assert hook.calls[0]["popen"] == {"start_new_session": True}


def test_submit_options_are_an_allowlist():
    with pytest.raises(InvalidInputError, match="unsupported keys"):
        spark_submit.validate_submit_options({"post_submit_commands": ["rm -rf /"]})
    assert spark_submit.validate_submit_options({"jars": "a.jar"}) == {"jars": "a.jar"}
