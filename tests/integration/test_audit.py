"""Audit before publish, through the real phases in the test's own Spark session (no spark-submit):
what each check measures on the staged version, and that a failed or broken check publishes nothing.

The end-to-end runs (a DAG, a concurrent reader, spark-submit and Spark Connect) are in
``test_audit_e2e.py``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.catalogs.write_observation import WriteObservation
from airflow_provider_ctas.checks import (
    AcceptedValues,
    NotNull,
    RowCount,
    RowCountChange,
    SqlCheck,
    Unique,
    ValueRange,
)
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.checks import PUBLISHED_VIEW, STAGED_VIEW, Check
from airflow_provider_ctas.core.protocol import PhaseRequest, PhaseResult, run_phases_for
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.driver.phases import run_phases
from tests.support.catalog import count, fresh, leftovers, location, properties
from tests.support.reporter import RecordingReporter

pytestmark = pytest.mark.integration


def run(spark, target: str, sql: str, checks: list[Check], **options: Any) -> tuple[PhaseResult, RecordingReporter]:
    txn = create_two_phase_table(
        key=TransactionKey("audit_dag", "ctas", f"run_{uuid.uuid4().hex}"),
        conn_id="spark_default",
        target=target,
        table_format="parquet",
        **{"mode": "replace", **options},
    )
    txn.begin(1, "2024-01-01T00:00:00+00:00")
    wire = [c.to_dict() for c in checks]
    request = PhaseRequest(phases=run_phases_for(wire), table=txn.to_dict(), sql=sql, checks=wire)
    log = RecordingReporter()
    # A session of its own: the audit's temporary views never meet another test's.
    return run_phases(spark.newSession(), request, log), log


def by_name(result: PhaseResult) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result.details["checks"]}


def test_checks_measure_the_staged_version_and_a_pass_publishes_with_their_summary(spark, database):
    target = f"{database}.orders"
    fresh(spark).sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 'open' AS status FROM range(100)")
    checks: list[Check] = [
        RowCount(min=1, max=1000),
        NotNull("id", "status"),
        Unique("id"),
        AcceptedValues(column="status", values=["open", "shipped"]),
        ValueRange(column="id", min=0, max=119),
        RowCountChange(min_ratio=0.9, max_ratio=1.5),
        # What the operator renders "{{ published }}" and "{{ staged }}" to.
        SqlCheck(name="no id lost", sql=f"SELECT id FROM {PUBLISHED_VIEW} EXCEPT SELECT id FROM {STAGED_VIEW}"),
    ]
    sql = "SELECT id, IF(id % 2 = 0, 'open', 'shipped') AS status FROM range(120)"
    result, log = run(spark, target, sql, checks)

    assert result.ok, result.error
    measured = {name: c["value"] for name, c in by_name(result).items()}
    assert measured == {
        "row_count": 120,
        "not_null(id,status)": 0,
        "unique(id)": 0,
        "accepted_values(status)": 0,
        "value_range(id)": 0,
        "row_count_change": 1.2,
        "no id lost": 0,
    }
    assert all(c["passed"] for c in result.details["checks"])
    assert [name for name, c in by_name(result).items() if "measured by the write" in c["note"]] == [
        "row_count",
        "not_null(id,status)",
        "accepted_values(status)",
        "value_range(id)",
        "row_count_change",
    ]
    assert [p.phase for p in result.phases] == ["begin", "prepare", "audit", "commit"]
    assert count(spark, target) == 120
    assert properties(spark, target)[markers.CHECKS].startswith("7/7 passed: row_count=120;")
    # Counted by the write itself (observed metrics): all but the distinct count Unique needs.
    assert f"audit: 5 built-in check(s) on `{STAGED_VIEW}` measured while the data was written" in "\n".join(
        log.lines
    ), log.lines
    assert any(line.startswith("audit: 1 built-in check(s) on") and "in one query" in line for line in log.lines)


def test_a_failed_check_publishes_nothing_and_names_what_failed(spark, database):
    target = f"{database}.kept"
    fresh(spark).sql(f"CREATE TABLE {target} USING parquet AS SELECT id, CAST(id AS STRING) AS code FROM range(50)")
    before = location(spark, target)
    sql = "SELECT id % 40 AS id, IF(id < 3, NULL, CAST(id AS STRING)) AS code FROM range(60)"
    checks_run: list[Check] = [RowCount(min=1), NotNull("code"), Unique("id"), ValueRange(column="id", max=30)]
    result, log = run(spark, target, sql, checks_run)

    assert not result.ok
    assert result.error is not None and result.error["code"] == "AUDIT_FAILED"
    assert result.error["phase"] == "audit"
    assert "3 of 4 check(s) failed" in result.error["message"]
    # The guard stopped the first write; the second counted every check's offending rows.
    stopped = [line for line in log.lines if "which stopped the write; writing again" in line]
    assert len(stopped) == 1 and "not_null(code)" in stopped[0], log.lines
    assert any("3 built-in check(s)" in line and "measured while the data was written" in line for line in log.lines)
    checks = by_name(result)
    assert (checks["not_null(code)"]["passed"], checks["not_null(code)"]["value"]) == (False, 3)
    assert (checks["value_range(id)"]["value"], len(checks["value_range(id)"]["sample"])) == (9, 5)
    assert {int(row["id"]) for row in checks["value_range(id)"]["sample"]} <= set(range(31, 40))
    assert checks["unique(id)"]["value"] == 20  # 60 rows, 40 distinct ids
    assert {row["code"] for row in checks["not_null(code)"]["sample"]} == {"None"}
    assert len(checks["unique(id)"]["sample"]) == 5
    assert all(row["rows"] == "2" for row in checks["unique(id)"]["sample"])
    # The published version is exactly as it was; this try's staging is gone.
    assert result.cleaned_up
    assert (count(spark, target), location(spark, target)) == (50, before)
    assert leftovers(spark, database) == []


def test_overwrite_partitions_checks_see_the_replaced_partitions_or_the_whole_result(spark, database):
    target = f"{database}.events"
    fresh(spark).sql(
        f"CREATE TABLE {target} USING parquet PARTITIONED BY (ds) AS "
        "SELECT id, IF(id < 10, '2024-01-01', '2024-01-02') AS ds FROM range(20)"
    )
    # Replaces 2024-01-02 (10 rows -> 5) and adds 2024-01-03; ids 0..4 collide with 2024-01-01's.
    sql = "SELECT id % 5 AS id, IF(id < 5, '2024-01-02', '2024-01-03') AS ds FROM range(10)"
    checks: list[Check] = [
        RowCount(max=10),
        Unique("id", "ds"),
        RowCountChange(min_ratio=0.6, name="shrink per partition"),
        Unique("id", scope="result", name="unique across the table"),
        RowCount(min=20, scope="result", name="table rows"),
    ]
    result, _ = run(spark, target, sql, checks, mode="overwrite_partitions", partition_by=["ds"])

    checks_seen = by_name(result)
    assert checks_seen["row_count"]["value"] == 10  # only what this run staged
    assert checks_seen["unique(id,ds)"]["passed"]
    assert checks_seen["shrink per partition"]["value"] == 1.0  # 10 staged rows vs the 10 of 2024-01-02
    # The table after the switch: 2024-01-01 (ids 0-9) stays beside 10 new rows with ids 0-4 twice.
    assert checks_seen["unique across the table"]["value"] == 10
    assert checks_seen["table rows"]["value"] == 20
    assert result.error is not None and result.error["code"] == "AUDIT_FAILED"
    assert count(spark, target, "ds = '2024-01-02'") == 10
    assert count(spark, target, "ds = '2024-01-03'") == 0
    assert leftovers(spark, database) == []


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (SqlCheck(name="typo", sql=f"SELECT * FROM {STAGED_VIEW} WHERE amout < 0"), "check 'typo' is not"),
        (SqlCheck(name="ddl", sql="DROP TABLE x"), "check 'ddl' is not a valid query"),
        (NotNull("nope"), "names column(s) the query does not produce: ['nope']"),
    ],
    ids=["bad-column", "ddl", "unknown-column"],
)
def test_a_check_that_cannot_run_fails_in_begin_before_any_data_is_written(spark, database, check, message):
    target = f"{database}.never"
    result, _ = run(spark, target, "SELECT id, id * 2 AS amount FROM range(10)", [check], mode="create")
    assert result.error is not None
    assert (result.error["code"], result.error["phase"]) == ("QUERY_ERROR", "begin")
    assert message in result.error["message"]
    assert [(p.phase, p.status) for p in result.phases] == [("begin", "failed")]  # prepare never ran
    assert not fresh(spark).catalog.tableExists(target)
    assert leftovers(spark, database) == []


def test_a_failed_check_on_create_leaves_no_target(spark, database):
    target = f"{database}.fresh"
    sql = "SELECT id, IF(id = 3, NULL, id) AS code FROM range(10)"
    result, _ = run(spark, target, sql, [RowCount(min=100), NotNull("code")], mode="create")
    assert result.error is not None and result.error["code"] == "AUDIT_FAILED"
    # The staging table's INSERT INTO ... BY NAME, observed through a temporary view.
    measured = [(c["value"], c["note"]) for c in result.details["checks"]]
    assert measured == [(10, "measured by the write"), (1, "measured by the write")]
    assert result.details["files"] >= 1, "the insert command's own metrics, as without checks"
    assert not fresh(spark).catalog.tableExists(target)
    assert leftovers(spark, database) == []


def test_the_write_guards_row_checks_in_its_own_code_and_a_violation_stops_it(spark, tmp_path):
    """Row checks are a guard in the written query, not observed counts: a write that passes them
    keeps the columns' types and nullability, and one offending row fails it naming the check."""
    checks: list[Check] = [
        RowCount(min=1),
        NotNull("id"),
        AcceptedValues(column="status", values=["open"]),
        ValueRange(column="id", max=99),
    ]
    query = "SELECT id, IF(id < {n}, 'open', 'late') AS status FROM range(100)"
    good = spark.sql(query.format(n=100))
    observation = WriteObservation(checks, partial=False)
    guarded = observation.attach(good, good.schema)
    assert [c.name for c in observation.guarded] == ["not_null(id)", "accepted_values(status)", "value_range(id)"]
    assert [c.name for c in observation.observed] == ["row_count"]
    assert guarded.schema == good.schema  # types and nullability: a table may require a column
    guarded.write.parquet(str(tmp_path / "good"))
    measured = observation.collect(RecordingReporter())
    assert measured is not None and measured.rows == 100
    assert dict(measured.counts) == {
        "not_null(id)": [0],
        "accepted_values(status)": [0],
        "value_range(id)": [0],
        "row_count": [],
    }

    # A write that reports its rows itself (an INSERT's metrics) needs no observation at all.
    reported = observation.attach(good, good.schema, rows_reported=True)
    assert observation.observation is None
    assert "CollectMetrics" not in reported._jdf.queryExecution().optimizedPlan().toString()
    assert "CollectMetrics" in guarded._jdf.queryExecution().optimizedPlan().toString()
    assert observation.collect(RecordingReporter()) is None, "rows neither observed nor reported: the audit counts them"
    assert observation.collect(RecordingReporter(), rows=100) == measured

    bad = spark.sql(query.format(n=60))
    with pytest.raises(Exception) as stopped:  # noqa: PT011 - Spark's own error, whatever its class
        observation.attach(bad, bad.schema).write.parquet(str(tmp_path / "bad"))
    assert observation.tripped(stopped.value) == checks[2]
    assert observation.tripped(RuntimeError("a write that failed for another reason")) is None
