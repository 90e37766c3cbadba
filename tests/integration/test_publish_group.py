"""Publish groups on a REST catalog (the Iceberg project's own ``RESTCatalogServer``): members stage,
audit and hold their tables through the real operator (``dag.test()``), and the publisher task
publishes them all in one ``POST /transactions/commit`` or none. An independent reader (its own
Spark 4.1 JVM) checks the tables through the same server."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.iceberg.group_table import GROUP, GROUP_SNAPSHOTS
from airflow_provider_ctas.catalogs.iceberg.strategy import lineage_namespace
from airflow_provider_ctas.core import markers
from ctas_devstack.iceberg_rest import IcebergRestCatalog
from tests.support.dags import DAGS_FOLDER, asset_events, load_dag, xcom_value
from tests.support.faults import Trial, reading_pause
from tests.support.fixtures import STOP_GRACE
from tests.support.iceberg import leftovers
from tests.support.processes import wait_for_line
from tests.support.table_reader import TableReader

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.formats, pytest.mark.xdist_group("iceberg_rest")]

CATALOG, NAMESPACE = "lake", "grouped"
FACTS, DIMS = f"{CATALOG}.{NAMESPACE}.facts", f"{CATALOG}.{NAMESPACE}.dims"

GROUP_DAG = """\
import datetime, json
import pendulum
from airflow.sdk import DAG
from airflow_provider_ctas.operators import AtomicCtasOperator, PublishGroupOperator

CONF = json.loads({conf!r})
with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         default_args={{"retries": {retries}, "retry_delay": datetime.timedelta(seconds=0)}}) as dag:
    facts = AtomicCtasOperator(task_id="facts", sql={facts_sql!r}, target_table={facts!r}, mode="replace",
                               table_format="iceberg", conf=CONF, publish_group="publish",
                               checks=[{{"type": "not_null", "columns": ["v"]}}], comment="facts by id",
                               column_comments={{"v": "the version"}})
    dims = AtomicCtasOperator(task_id="dims", sql={dims_sql!r}, target_table={dims!r}, mode="replace",
                              table_format="iceberg", conf=CONF, publish_group="publish")
    [facts, dims] >> PublishGroupOperator(task_id="publish")
"""


@pytest.fixture
def reader(rest_reader: TableReader) -> TableReader:
    rest_reader.rows(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    return rest_reader


@pytest.fixture
def tables(reader) -> None:
    """Both members' tables at version 1 (created by someone else: a group replaces existing tables)."""
    for name in (FACTS, DIMS):
        reader.rows(f"DROP TABLE IF EXISTS {name} PURGE")
        reader.rows(f"CREATE TABLE {name} USING iceberg AS SELECT id, 1 AS v FROM range(10)")


def _write(dag_id: str, conf: dict[str, str], *, v: int = 2, dims_sql: str | None = None, retries: int = 0) -> Path:
    path = DAGS_FOLDER / f"{dag_id}.py"
    path.write_text(
        GROUP_DAG.format(
            conf=json.dumps(conf), dag_id=dag_id, retries=retries, facts=FACTS, dims=DIMS,
            facts_sql=f"SELECT id, {v} AS v FROM range(20)",
            dims_sql=dims_sql or f"SELECT id, {v} AS v FROM range(5)",
        )
    )  # fmt: skip
    return path


def _run(dag_id: str, conf: dict[str, str], *, v: int = 2, dims_sql: str | None = None, retries: int = 0) -> Any:
    run = load_dag(_write(dag_id, conf, v=v, dims_sql=dims_sql, retries=retries)).test()
    states = {ti.task_id: (str(ti.state), ti.try_number) for ti in run.get_task_instances()}
    return run.run_id, states


def _versions(reader: TableReader) -> tuple[Any, Any]:
    return (reader.value(f"SELECT max(v) FROM {FACTS}"), reader.value(f"SELECT max(v) FROM {DIMS}"))


def _left(reader: TableReader) -> list[str]:
    return leftovers(reader, f"{CATALOG}.{NAMESPACE}", FACTS) + leftovers(reader, f"{CATALOG}.{NAMESPACE}", DIMS)


def test_a_group_publishes_every_member_in_one_commit_and_its_retry_finds_them_published(
    airflow_db, reader, tables, on_rest, monkeypatch, tmp_path
):
    # The dims member's first try fails after it held: its retry holds again and joins the group.
    # The publisher's first try fails after its commit landed: its retry must report, not redo.
    faults = {
        "after_hold": {"raise": "worker lost after the hold", "only_try": 1, "only_target": DIMS},
        "after_group_publish": {"raise": "lost after the commit", "only_try": 1},
    }
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps(faults))
    run_id, states = _run("group_publish", on_rest, retries=1)
    assert states["facts"] == ("success", 1) and states["dims"] == ("success", 2), states
    assert states["publish"] == ("success", 2), states
    assert _versions(reader) == (2, 2)
    assert reader.value(f"SELECT count(*) FROM {FACTS}") == 20 and reader.value(f"SELECT count(*) FROM {DIMS}") == 5
    facts, dims = reader.properties(FACTS), reader.properties(DIMS)
    assert facts[GROUP] == dims[GROUP], "both were published by the same group run"
    assert facts[GROUP_SNAPSHOTS] == dims[GROUP_SNAPSHOTS]
    pinned = json.loads(facts[GROUP_SNAPSHOTS])
    assert pinned[FACTS] == reader.value(f"SELECT snapshot_id FROM {FACTS}.refs WHERE name = 'main'")
    assert pinned[DIMS] == reader.value(f"SELECT snapshot_id FROM {DIMS}.refs WHERE name = 'main'")
    assert facts[markers.DAG_ID] == "group_publish" and facts[markers.TASK_ID] == "facts"
    assert dims[markers.TRY_NUMBER] == "2", "what the group published of dims is its retry's"
    assert facts[markers.CHECKS].startswith("1/1"), "the member's audit is recorded on its published version"
    assert reader.comments(FACTS) == ("facts by id", {"v": "the version"}), "set in the group's commit"
    assert _left(reader) == []
    result = xcom_value("group_publish", run_id, "return_value")
    outcomes = {name: member["outcome"] for name, member in result["members"].items()}
    assert outcomes == {FACTS: "already_published", DIMS: "already_published"}, result
    namespace = lineage_namespace(on_rest, None)
    for name in ("facts", "dims"):
        announced = [e for e in asset_events(f"{namespace}/{NAMESPACE}/{name}") if e["dag_id"] == "group_publish"]
        assert len(announced) == 1, f"one event per member table, from the publisher: {announced}"
        assert announced[0]["extra"]["publish_group"] == "publish", announced


def test_a_failed_member_publishes_no_member_and_removes_the_others_staging(airflow_db, reader, tables, on_rest):
    failing = "SELECT id, raise_error('no dims today') AS v FROM range(5)"
    _, states = _run("group_member_fails", on_rest, dims_sql=failing)
    assert states["facts"][0] == "success" and states["dims"][0] == "failed", states
    assert states["publish"][0] == "failed", states
    assert _versions(reader) == (1, 1), "neither table changed"
    assert _left(reader) == [], "the held member's branch and fence are removed"


def test_a_superseded_member_makes_the_whole_group_commit_fail(
    airflow_db, reader, tables, on_rest, monkeypatch, tmp_path
):
    """Between the members' holds and the commit, the dims member's branch goes (as a newer try's
    begin removes it): the commit's requirement on that branch refuses the whole group, so facts,
    whose own requirements hold, is not published either."""
    progress, go = tmp_path / "progress", tmp_path / "go"
    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(go)}}
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps(faults))

    dropped: list[str] = []

    def supersede() -> None:
        try:
            deadline = time.monotonic() + 300
            while "before_publish" not in (progress.read_text() if progress.exists() else ""):
                if time.monotonic() > deadline:
                    return  # the publisher never reached its commit: the assertions below say so
                time.sleep(0.2)
            branch = next(r[0] for r in reader.rows(f"SELECT name FROM {DIMS}.refs") if r[0] != "main")
            reader.rows(f"ALTER TABLE {DIMS} DROP BRANCH `{branch}`")
            dropped.append(branch)
        finally:
            Path(go).touch()

    helper = threading.Thread(target=supersede, daemon=True)
    helper.start()
    _, states = _run("group_superseded", on_rest)
    helper.join(timeout=60)
    assert dropped, "the dims member's branch was dropped while the publisher waited at its commit"
    assert states["publish"][0] == "failed", states
    assert _versions(reader) == (1, 1), "no member was published"
    assert _left(reader) == [], "the publisher's failed commit removed every member's staging"


def test_a_reader_of_the_group_snapshots_never_sees_two_versions_mixed(airflow_db, reader, tables, on_rest):
    """A reader that reads every member at the snapshots one member's ``group_snapshots`` names sees
    one group's version of every table, whatever order the catalog applies the tables in."""
    _run("group_reader_before", on_rest, v=2)
    seen: list[tuple[Any, Any]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            started = time.monotonic()
            pinned = json.loads(reader.properties(FACTS)[GROUP_SNAPSHOTS])
            seen.append(
                (
                    reader.value(f"SELECT max(v) FROM {FACTS} VERSION AS OF {pinned[FACTS]}"),
                    reader.value(f"SELECT max(v) FROM {DIMS} VERSION AS OF {pinned[DIMS]}"),
                )
            )
            stop.wait(reading_pause(started, 0.5))

    poller = threading.Thread(target=read, daemon=True)
    poller.start()
    _, states = _run("group_reader", on_rest, v=3)
    time.sleep(2)
    stop.set()
    poller.join(timeout=60)
    assert states["publish"][0] == "success", states
    assert seen and all(f == d for f, d in seen), f"a mixed read: {sorted(set(seen))}"
    assert seen[0] == (2, 2) and seen[-1] == (3, 3), f"reads saw the group before and after: {seen[0]}..{seen[-1]}"


def test_a_catalog_down_at_the_commit_publishes_nothing_and_the_publishers_retry_publishes_the_group(
    airflow_db, rest, reader, tables, on_rest, monkeypatch, tmp_path
):
    """The server stops while the publisher's driver is about to commit: that try fails without
    publishing and keeps the members' held staging; the server is back for the retry, which
    publishes both members (their own tasks do not run again)."""
    progress, go = tmp_path / "progress", tmp_path / "go"
    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(go), "only_try": 1}}
    monkeypatch.setenv("AIRFLOW_CTAS_FAULTS", json.dumps(faults))
    events: list[str] = []

    def outage() -> None:
        try:
            deadline = time.monotonic() + 300
            while "before_publish try=1" not in (progress.read_text() if progress.exists() else ""):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.2)
            rest.stop(STOP_GRACE)
            events.append("stopped")
        finally:
            Path(go).touch()
        while "result phases=commit" not in progress.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        IcebergRestCatalog(rest.root, rest.port).start()
        events.append("restarted")

    helper = threading.Thread(target=outage, daemon=True)
    helper.start()
    _, states = _run("group_outage", on_rest, retries=2)
    helper.join(timeout=120)
    assert events == ["stopped", "restarted"], events
    assert states["facts"] == ("success", 1) and states["dims"] == ("success", 1), states
    assert states["publish"][0] == "success" and states["publish"][1] >= 2, states
    assert _versions(reader) == (2, 2)
    assert _left(reader) == []


def test_a_publisher_killed_while_it_decides_publishes_nothing_and_its_next_try_publishes_the_group(
    airflow_db, reader, tables, on_rest, tmp_path
):
    """Each try is its own process (the members', then the publisher's); the publisher's process
    group (the task and its spark-submit) is SIGKILLed while its driver waits for the decision."""
    dag_id, run_id = "group_killed", "killed"
    dag_file = _write(dag_id, on_rest)
    for member in ("facts", "dims"):
        state = Trial(dag_file, dag_id, run_id, tmp_path / f"{member}.log", task_id=member).start().wait()
        assert state == "success", (tmp_path / f"{member}.log").read_text(errors="replace")[-3000:]
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "before_decision": {"sleep": 600, "only_try": 1}}
    first = Trial(dag_file, dag_id, run_id, tmp_path / "publish1.log", faults, task_id="publish").start()
    wait_for_line(progress, "before_decision try=1", timeout=240)
    first.signal_group(signal.SIGKILL)
    first.wait()
    assert _versions(reader) == (1, 1), "the killed publisher published nothing"
    assert len(_left(reader)) == 4, "each member's branch and fence wait for the publisher's next try"
    second = Trial(dag_file, dag_id, run_id, tmp_path / "publish2.log", task_id="publish").start().wait()
    assert second == "success", (tmp_path / "publish2.log").read_text(errors="replace")[-3000:]
    assert _versions(reader) == (2, 2)
    assert _left(reader) == []


def test_a_member_killed_after_it_held_publishes_no_member_and_every_members_staging_goes(
    airflow_db, reader, tables, on_rest, tmp_path
):
    """The dims member's process group is SIGKILLed right after its driver held its branch, before
    the task recorded it: the publisher finds dims not prepared, publishes nothing and removes both
    members' branches and fences (dims' too: its markers name the try its XCom names)."""
    dag_id, run_id = "group_member_killed", "killed"
    dag_file = _write(dag_id, on_rest)
    assert Trial(dag_file, dag_id, run_id, tmp_path / "facts.log", task_id="facts").start().wait() == "success"
    progress = tmp_path / "progress"
    faults = {"progress_file": str(progress), "after_hold": {"sleep": 600, "only_target": DIMS}}
    dims = Trial(dag_file, dag_id, run_id, tmp_path / "dims.log", faults, task_id="dims").start()
    wait_for_line(progress, "after_hold try=1", timeout=240)
    dims.signal_group(signal.SIGKILL)
    dims.wait()
    assert len(_left(reader)) == 4, "both members' branches and fences are there when the publisher runs"
    publisher = Trial(dag_file, dag_id, run_id, tmp_path / "publish.log", task_id="publish").start().wait()
    assert publisher == "failed", publisher
    assert "GROUP_MEMBER_FAILED" in (tmp_path / "publish.log").read_text(errors="replace")
    assert _versions(reader) == (1, 1), "no member was published"
    assert _left(reader) == [], "every member's staging is removed"
