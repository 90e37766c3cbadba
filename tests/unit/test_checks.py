"""Audit checks as data: validation, the dict (wire) form, and the SQL they turn into."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.catalogs.audit import Measured, _outside, aggregates, raise_if_failed
from airflow_provider_ctas.catalogs.write_observation import WriteObservation, measurable
from airflow_provider_ctas.checks import (
    AcceptedValues,
    NotNull,
    RowCount,
    RowCountChange,
    SqlCheck,
    Unique,
    ValueRange,
)
from airflow_provider_ctas.core.checks import CheckResult, check_from_dict, checks_from_wire, summary, validate_checks
from airflow_provider_ctas.core.errors import AuditFailedError, CorruptStateError, InvalidInputError
from tests.support.reporter import RecordingReporter

EVERY_KIND = [
    RowCount(min=1, max=10),
    NotNull("a", "B"),
    Unique("id", scope="result"),
    AcceptedValues(column="status", values=["open", 3, 2.5, True]),
    RowCountChange(min_ratio=0.5, max_ratio=2),
    ValueRange(column="day", min="2024-01-01", max="2024-12-31"),
    SqlCheck(name="no negatives", sql="SELECT * FROM {{ staged }} WHERE amount < 0"),
]


@pytest.mark.parametrize("check", EVERY_KIND, ids=lambda c: c.type)
def test_every_check_round_trips_through_its_dict_form(check):
    data = check.to_dict()
    again = check_from_dict(data)
    assert type(again) is type(check)
    assert again.to_dict() == data


def test_names_default_to_what_they_check_and_columns_are_lowercased():
    assert [c.name for c in EVERY_KIND[:6]] == [
        "row_count",
        "not_null(a,b)",
        "unique(id)",
        "accepted_values(status)",
        "row_count_change",
        "value_range(day)",
    ]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: RowCount(), "needs min, max or both"),
        (lambda: RowCount(min=5, max=1), "above max"),
        (lambda: RowCount(min=-1), "non-negative integer"),
        (lambda: RowCount(min=True), "non-negative integer"),
        (lambda: NotNull(), "at least one column"),
        (lambda: NotNull("a; DROP TABLE x"), "only letters, digits"),
        (lambda: Unique("a", "a"), "twice"),
        (lambda: AcceptedValues(column="c", values=[]), "1 to 1000 values"),
        (lambda: AcceptedValues(column="c", values="abc"), "must be a list"),
        (lambda: AcceptedValues(column="c", values=[{"x": 1}]), "strings, numbers or booleans"),  # type: ignore[list-item]
        (lambda: AcceptedValues(column="c", values=[float("nan")]), "not a finite number"),
        (lambda: RowCountChange(), "min_ratio, max_ratio or both"),
        (lambda: RowCountChange(min_ratio=3, max_ratio=2), "above max_ratio"),
        (lambda: RowCountChange(max_ratio=float("inf")), "non-negative number"),
        (lambda: ValueRange(column="c"), "needs min, max or both"),
        (lambda: ValueRange(column="c", min=5, max=1), "above max"),
        (lambda: ValueRange(column="c", min=True), "numbers or strings"),
        (lambda: ValueRange(column="c", max=float("inf")), "not a finite number"),
        (lambda: ValueRange(column="c", min=[1]), "strings, numbers or booleans"),  # type: ignore[arg-type]
        (lambda: SqlCheck(name="n", sql="  "), "needs sql"),
        (lambda: SqlCheck(sql="SELECT 1"), "needs a name"),
        (lambda: RowCount(min=1, scope="everything"), "scope"),
        (lambda: RowCount(min=1, name="x\ny"), "printable"),
    ],
)
def test_bad_checks_are_refused_with_the_reason(build, message):
    with pytest.raises(InvalidInputError, match=message):
        build()


def test_dict_form_refuses_unknown_types_and_fields():
    with pytest.raises(InvalidInputError, match=r"unknown check type 'os\.system'"):
        check_from_dict({"type": "os.system", "columns": ["a"]})
    with pytest.raises(InvalidInputError, match="has no field"):
        check_from_dict({"type": "not_null", "columns": ["a"], "min": 1})
    with pytest.raises(InvalidInputError, match="list of column names"):
        check_from_dict({"type": "unique", "columns": "a"})
    assert check_from_dict({"type": "unique", "columns": ["a", "b"]}).to_dict() == {
        "type": "unique",
        "name": "unique(a,b)",
        "scope": "staged",
        "columns": ["a", "b"],
    }


def test_a_list_of_checks_needs_unique_names_and_a_list():
    assert validate_checks(None) == ()
    assert len(validate_checks([NotNull("a"), {"type": "row_count", "min": 1}])) == 2
    with pytest.raises(InvalidInputError, match="repeated: not_null"):
        validate_checks([NotNull("a", name="not_null"), NotNull("b", name="not_null")])
    with pytest.raises(InvalidInputError, match="must be a list"):
        validate_checks(NotNull("a"))
    with pytest.raises(InvalidInputError, match="must be a list"):
        validate_checks("SELECT 1")


def test_a_check_changed_after_construction_is_validated_again():
    """Templating renders a check's fields in place, after the DAG was parsed."""
    check = SqlCheck(name="n", sql="{{ params.q }}")
    check.sql = ""
    with pytest.raises(InvalidInputError, match="needs sql"):
        validate_checks([check])


def test_malformed_checks_on_the_wire_are_corrupt_state():
    with pytest.raises(CorruptStateError):
        checks_from_wire([{"type": "python", "code": "import os"}])


def test_accepted_values_become_quoted_literals_only():
    check = AcceptedValues(column="s", values=["it's", "a\\", 1, False])
    assert _outside(check) == "`s` IS NOT NULL AND `s` NOT IN ('it\\'s', 'a\\\\', 1, false)"


def test_builtins_share_one_aggregate_query():
    assert aggregates(RowCount(min=1)) == []
    assert aggregates(RowCountChange(max_ratio=2)) == []
    assert aggregates(NotNull("a", "b")) == ["count_if(`a` IS NULL OR `b` IS NULL)"]
    assert aggregates(Unique("k1", "k2")) == [
        "count_if(`k1` IS NOT NULL AND `k2` IS NOT NULL)",
        "count(DISTINCT `k1`, `k2`)",
    ]
    assert aggregates(ValueRange(column="d", min="2024-01-01")) == [
        "count_if(`d` IS NOT NULL AND (`d` < '2024-01-01'))"
    ]
    expected = ["count_if(`n` IS NOT NULL AND (`n` < 0 OR `n` > 9.5))"]
    assert aggregates(ValueRange(column="n", min=0, max=9.5)) == expected


def test_the_write_measures_what_one_aggregate_over_its_rows_decides():
    """Unique needs a distinct count (observed metrics refuse one), SQL checks and a partition
    overwrite's whole-result checks read other data."""
    result_rows = RowCount(min=1, scope="result")
    assert [measurable(c, partial=False) for c in EVERY_KIND] == [True, True, False, True, True, True, False]
    assert measurable(result_rows, partial=False) and not measurable(result_rows, partial=True)
    assert measurable(NotNull("a"), partial=True)


class _Delivered:
    def __init__(self, values: dict[str, int | None]) -> None:
        self.get = values


def test_what_the_write_observed_is_split_back_into_each_checks_counts():
    checks = [RowCount(min=1), Unique("id"), NotNull("a", "b"), AcceptedValues(column="s", values=["x"])]
    observation = WriteObservation(checks, partial=False)
    observation.observed = [c for c in checks if not isinstance(c, Unique)]
    observation.attached, observation.observation = True, _Delivered({"a0": 7, "a1": 2, "a2": None})
    measured = observation.collect(RecordingReporter())
    assert measured == Measured(7, {"row_count": [], "not_null(a,b)": [2], "accepted_values(s)": [0]})
    assert observation.measured is measured


def test_an_observation_that_delivered_nothing_leaves_the_checks_to_the_audit_query():
    log = RecordingReporter()
    observation = WriteObservation([NotNull("a")], partial=False)
    observation.observed = list(observation.checks)
    observation.attached, observation.observation = True, _Delivered({})  # what Spark Connect gives for a SQL insert
    assert observation.collect(log) is None
    assert observation.measured is None
    assert "counted by a query" in log.lines[0]


def _stopping_write(observation: WriteObservation, failures: list[Exception]):
    """A write that fails with each of ``failures`` in turn, then succeeds; it records whether
    the observation was guarding each time."""
    guarding: list[bool] = []

    def write() -> str:
        guarding.append(observation.guarding)
        if failures:
            raise failures.pop(0)
        return "written"

    return write, guarding


def test_a_write_a_guard_stopped_runs_again_counting_and_another_failure_is_not_retried():
    log = RecordingReporter()
    observation = WriteObservation([NotNull("a"), ValueRange(column="b", max=3)], partial=False)
    observation.guarded = list(observation.checks)
    write, guarding = _stopping_write(
        observation, [RuntimeError("[USER_RAISED_EXCEPTION] airflow-ctas-check-violated:1")]
    )
    assert observation.write(write, log, rewritable=lambda: True) == "written"
    assert guarding == [True, False]
    assert "check 'value_range(b)'" in log.lines[0] and "writing again" in log.lines[0]

    other = WriteObservation([NotNull("a")], partial=False)
    other.guarded = list(other.checks)
    write, guarding = _stopping_write(other, [RuntimeError("disk full")])
    with pytest.raises(RuntimeError, match="disk full"):
        other.write(write, log, rewritable=lambda: True)
    assert guarding == [True]


def test_a_guard_stop_that_left_rows_behind_fails_the_check_without_writing_again():
    observation = WriteObservation([NotNull("a")], partial=False)
    observation.guarded = list(observation.checks)
    write, guarding = _stopping_write(observation, [RuntimeError("airflow-ctas-check-violated:0")])
    with pytest.raises(AuditFailedError, match=r"check 'not_null\(a\)' failed, nothing was published"):
        observation.write(write, RecordingReporter(), rewritable=lambda: False)
    assert guarding == [True]


def test_a_failed_check_names_itself_its_value_and_a_sample():
    results = [
        CheckResult("row_count", "row_count", "staged", True, 10, "between 1 and 100"),
        CheckResult("not_null(a)", "not_null", "staged", False, 2, "0 rows with a NULL", sample=[{"a": "None"}]),
    ]
    with pytest.raises(AuditFailedError, match=r"1 of 2 check\(s\) failed.*not_null\(a\): FAILED \(measured 2"):
        raise_if_failed(results)
    raise_if_failed(results[:1])
    assert summary(results) == "1/2 passed: row_count=10; not_null(a)=2"
    assert len(summary(results * 1000)) <= 3900
