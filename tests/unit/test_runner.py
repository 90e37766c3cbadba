"""The runner's own logic (what it hands to SparkSubmitHook); Spark itself is exercised end to end."""

from __future__ import annotations

import json
import logging
import threading
import time
import zipfile
from typing import ClassVar

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.core.decision import announced_port
from airflow_provider_ctas.core.errors import (
    CoordinatorLostError,
    CorruptStateError,
    DecisionPathError,
    InvalidInputError,
)
from airflow_provider_ctas.core.protocol import GC_PHASES, RUN_PHASES, PhaseRequest, PhaseResult, Reached
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.runners import spark_submit, yarn_driver
from airflow_provider_ctas.runners.coordinator import CommitCoordinator
from airflow_provider_ctas.spark.coordinator_link import CoordinatorLink


class RecordingHook:
    """Stands in for SparkSubmitHook: records what it was given and answers like a finished driver;
    on YARN in cluster mode, like a driver in a container (the real driver's end of the channel)."""

    calls: ClassVar[list[dict]] = []
    master: ClassVar[str] = "local[2]"
    rm_address: ClassVar[str | None] = None

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self._connection = {"master": RecordingHook.master, "deploy_mode": kwargs.get("deploy_mode")}
        self._is_yarn = "yarn" in RecordingHook.master
        self._should_track_driver_status = False
        self._yarn_application_id: str | None = None
        self.driver: threading.Thread | None = None
        self.killed = False

    def _get_yarn_rm_base_url(self):
        if RecordingHook.rm_address is None:
            raise ValueError("no yarn_resourcemanager_webapp_address")
        return RecordingHook.rm_address

    def _query_yarn_application_status(self, application_id):
        running = self.driver is not None and self.driver.is_alive()
        return ("RUNNING", "UNDEFINED", "") if running else ("FINISHED", "SUCCEEDED", "")

    def on_kill(self):
        self.killed = True

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
        if self.kwargs.get("yarn_track_via_rm_api"):
            self._yarn_application_id = "application_1_0001"
            self.driver = threading.Thread(target=self._driver_in_a_container, args=(request,))
            self.driver.start()
            return
        with open(request["result_path"], "w") as handle:
            handle.write(PhaseResult(ok=True, reached=Reached.COMMITTED, outcome="published").to_json())

    def _driver_in_a_container(self, request):
        """What app.py and phases.py do with the channel: listen, announce, ask, send the result."""
        table = request["table"]
        link = CoordinatorLink(request["coordinator"], table["txn_id"], table["try_number"], lambda reason: None)
        try:
            link.connect(RecordingHook.announced.append)
        except CoordinatorLostError:
            return  # no task connected: the real driver stops here, before begin
        link.await_commit()
        link.send_result(PhaseResult(ok=True, reached=Reached.COMMITTED, outcome="published").to_json())
        time.sleep(0.2)
        link.close()

    announced: ClassVar[list[str]] = []


@pytest.fixture
def hook(monkeypatch):
    RecordingHook.calls, RecordingHook.announced = [], []
    RecordingHook.master, RecordingHook.rm_address = "local[2]", None
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
    with pytest.raises(InvalidInputError, match="deploy mode 'cluster' is supported on YARN only"):
        clustered.run(PhaseRequest(phases=RUN_PHASES, table={}, sql="SELECT 1"), name="n", coordinator=coordinator)
    hook.master = "yarn"
    with pytest.raises(InvalidInputError, match="set yarn_resourcemanager_webapp_address"):
        clustered.run(PhaseRequest(phases=RUN_PHASES, table={}, sql="SELECT 1"), name="n", coordinator=coordinator)
    assert hook.calls == []


def test_in_yarn_cluster_mode_the_task_connects_to_its_driver_and_gets_the_result_on_the_channel(hook, monkeypatch):
    """The driver listens and announces its port; the task finds it (the ResourceManager's answer,
    stood in for here), connects, decides, and reads the result from the channel: nothing listens
    in the task process, so a driver that cannot reach the worker still gets its decision."""
    hook.master, hook.rm_address = "yarn", "http://rm:8088"

    def locate(found_hook, txn_id, try_number, timeout):
        deadline = time.monotonic() + 5
        while not hook.announced and time.monotonic() < deadline:
            time.sleep(0.01)
        return "127.0.0.1", announced_port(hook.announced[0], txn_id=txn_id, try_number=try_number)

    monkeypatch.setattr(spark_submit, "locate_driver", locate)
    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"), conn_id="c", target="db.t", mode="create", table_format="parquet"
    )
    table.begin(2, "2024-01-01T00:00:00+00:00")
    runner = spark_submit.SparkSubmitRunner(conn_id="c", conf=None, submit_options={"deploy_mode": "cluster"})
    result = runner.run(PhaseRequest(phases=RUN_PHASES, table=table.to_dict(), sql="SELECT 1"), name="n")
    assert (result.ok, result.outcome) == (True, "published")
    (call,) = hook.calls
    settings = call["request"]["coordinator"]
    assert settings["driver_listens"] is True and "address" not in settings and "port" not in settings
    assert call["yarn_track_via_rm_api"] is True
    assert call["conf"]["spark.yarn.submit.waitAppCompletion"] == "false"
    assert call["conf"]["spark.yarn.maxAppAttempts"] == "1"
    assert call["conf"]["spark.yarn.tags"] == f"airflow-ctas-txn-{table.txn_id},airflow-ctas-try-2"


def test_a_durable_try_waits_for_the_earlier_tries_applications_that_still_run(monkeypatch):
    """The ResourceManager's answers stood in for: try 3 waits while try 1's application runs (a
    driver finishing its write for it), ignores a later try's, and goes on once none is left."""
    answers = [
        [{"id": "app_1", "state": "RUNNING", "applicationTags": "airflow-ctas-txn-x,airflow-ctas-try-1"},
         {"id": "app_4", "state": "RUNNING", "applicationTags": "airflow-ctas-try-4,airflow-ctas-txn-x"}],
        [{"id": "app_1", "state": "RUNNING", "applicationTags": "airflow-ctas-txn-x,airflow-ctas-try-1"}],
        [{"id": "app_4", "state": "RUNNING", "applicationTags": "airflow-ctas-try-4,airflow-ctas-txn-x"}],
    ]  # fmt: skip
    asked: list[str] = []

    class Answer:
        def __init__(self, apps: list[dict[str, str]]) -> None:
            self.apps = apps

        def json(self) -> dict[str, object]:
            return {"apps": {"app": self.apps} if self.apps else None}

    def get(url: str, auth: object, *, what: str) -> Answer:
        asked.append(url)
        return Answer(answers.pop(0))

    class Hook:
        _resolved_yarn_rm_auth = None

        def _get_yarn_rm_base_url(self) -> str:
            return "http://rm:8088"

    monkeypatch.setattr(yarn_driver, "_get", get)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    said: list[str] = []
    followed = yarn_driver.wait_for_earlier_tries(Hook(), "x", 3, said.append)  # type: ignore[arg-type]
    assert followed == ["app_1"] and answers == []
    assert all(
        "applicationTags=airflow-ctas-txn-x&states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING" in u for u in asked
    )
    assert len(said) == 1 and "try 1's driver (YARN application app_1, RUNNING)" in said[0]


def test_a_cluster_mode_driver_the_task_cannot_reach_is_killed_with_a_code_that_says_so(hook, monkeypatch):
    hook.master, hook.rm_address = "yarn", "http://rm:8088"

    def unreachable(found_hook, txn_id, try_number, timeout):
        raise DecisionPathError("the NodeManager did not answer from this worker")

    monkeypatch.setattr(spark_submit, "locate_driver", unreachable)
    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"), conn_id="c", target="db.t", mode="create", table_format="parquet"
    )
    table.begin(1, "2024-01-01T00:00:00+00:00")
    runner = spark_submit.SparkSubmitRunner(conn_id="c", conf=None, submit_options={"deploy_mode": "cluster"})
    coordinator = CommitCoordinator(table.txn_id, 1, logging.getLogger("test"), driver_listens=True, accept_seconds=1)
    result = runner.run(
        PhaseRequest(phases=RUN_PHASES, table=table.to_dict(), sql="SELECT 1"), name="n", coordinator=coordinator
    )
    assert not result.ok and result.error is not None
    assert result.error["code"] == "DECISION_PATH_UNAVAILABLE"
    assert "NodeManager did not answer" in result.error["message"]


def test_detached_runs_get_their_own_session(hook):
    runner = spark_submit.SparkSubmitRunner(conn_id="spark_default", conf=None, submit_options=None)
    runner.run(PhaseRequest(phases=("abort",), table={}), name="n", detach=True)
    assert hook.calls[0]["popen"] == {"start_new_session": True}


class _Timeout(BaseException):
    """As Airflow's ``AirflowTaskTimeout``: raised in the task's thread, it unwinds ``run()``."""


def test_on_kill_kills_a_running_submission_and_after_an_unwound_run_says_it_killed_nothing(hook, monkeypatch, caplog):
    """A SIGTERM reaches ``on_kill`` while spark-submit runs; an ``execution_timeout`` reaches it
    after ``run()`` unwound, when there is nothing left here to kill: the log says which."""
    runner = spark_submit.SparkSubmitRunner(
        conn_id="spark_default", conf=None, submit_options=None, log=logging.getLogger("kill")
    )
    submitted: list[RecordingHook] = []

    def submit(self, application, **popen_kwargs):
        submitted.append(self)
        runner.kill()
        raise _Timeout

    monkeypatch.setattr(RecordingHook, "submit", submit)
    with caplog.at_level(logging.INFO, logger="kill"), pytest.raises(_Timeout):
        runner.run(PhaseRequest(phases=("abort",), table={}), name="n")
    assert [h.killed for h in submitted] == [True]
    with caplog.at_level(logging.INFO, logger="kill"):
        runner.kill()
    assert [r.getMessage().split(",")[0] for r in caplog.records] == [
        "[airflow-ctas] on_kill: killing the Spark application",
        "[airflow-ctas] on_kill: no Spark run in progress here",
    ]


def test_submit_options_are_an_allowlist():
    with pytest.raises(InvalidInputError, match="unsupported keys"):
        spark_submit.validate_submit_options({"post_submit_commands": ["rm -rf /"]})
    assert spark_submit.validate_submit_options({"jars": "a.jar"}) == {"jars": "a.jar"}
