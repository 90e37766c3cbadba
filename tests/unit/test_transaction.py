from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table, load_two_phase_table
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core.errors import (
    AtomicityNotSupportedError,
    CorruptStateError,
    FencedError,
    InvalidInputError,
    InvalidTransitionError,
)
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import SCHEMA_VERSION, Outcome, TransactionKey, TxnState

KEY = TransactionKey("dag", "task", "manual__2024-01-01T00:00:00+00:00", -1)
AT = "2024-01-01T00:00:00+00:00"


def table(**overrides) -> SessionCatalogTable:
    options: dict[str, Any] = {
        "key": KEY,
        "conn_id": "spark_default",
        "target": "analytics.orders",
        "mode": "create",
        "table_format": "parquet",
        "partition_by": ["country"],
        "table_properties": {"team": "data-eng"},
    }
    options.update(overrides)
    result = create_two_phase_table(**options)
    assert isinstance(result, SessionCatalogTable)
    return result


def test_transaction_id_is_deterministic_per_task_instance():
    assert KEY.txn_id == TransactionKey("dag", "task", "manual__2024-01-01T00:00:00+00:00", -1).txn_id
    others = [
        TransactionKey("dag2", "task", KEY.run_id, -1),
        TransactionKey("dag", "task2", KEY.run_id, -1),
        TransactionKey("dag", "task", "other", -1),
        TransactionKey("dag", "task", KEY.run_id, 0),
        # A naive concatenation would make these two collide.
        TransactionKey("da", "gtask", KEY.run_id, -1),
    ]
    assert len({KEY.txn_id, *(k.txn_id for k in others)}) == 6
    assert len(KEY.txn_id) == 32


def test_happy_path_transitions():
    t = table()
    t.begin(1, AT)
    t.mark_prepared(1, AT, {"row_count": 3})
    assert t.commit(1, AT, Outcome.PUBLISHED, {"publish": {"mechanism": "rename"}})
    assert t.state is TxnState.COMMITTED and t.last_committed_try == 1
    assert not t.commit(1, AT, Outcome.PUBLISHED), "commit is idempotent"
    assert t.finalize(1, AT) and not t.finalize(1, AT)
    assert not t.abort(1, AT), "nothing to abort after commit"
    assert [(h.try_number, h.state) for h in t.history] == [
        (1, TxnState.BEGUN),
        (1, TxnState.PREPARED),
        (1, TxnState.COMMITTED),
    ]


def test_abort_is_idempotent_and_a_later_try_restarts():
    t = table()
    t.begin(1, AT)
    assert t.abort(1, AT) and not t.abort(1, AT)
    t.begin(2, AT)
    assert t.state is TxnState.BEGUN and t.try_number == 2 and t.details == {}
    t.begin(2, AT)  # begin of the same try again is a no-op


def test_a_crashed_try_is_superseded_by_the_next():
    t = table()
    t.begin(1, AT)
    t.mark_prepared(1, AT)
    t.begin(3, AT)
    assert t.history[-1].note == "try 1 ended without commit or abort"


def test_older_tries_are_fenced():
    t = table()
    t.begin(2, AT)
    with pytest.raises(FencedError):
        t.begin(1, AT)
    for action in (
        lambda: t.commit(1, AT, Outcome.PUBLISHED),
        lambda: t.abort(1, AT),
        lambda: t.mark_prepared(1, AT),
    ):
        with pytest.raises(FencedError):
            action()


def test_invalid_transitions():
    t = table()
    with pytest.raises(InvalidTransitionError):
        t.begin(0, AT)
    t.begin(1, AT)
    t.abort(1, AT)
    with pytest.raises(InvalidTransitionError):
        t.commit(1, AT, Outcome.PUBLISHED)
    with pytest.raises(InvalidTransitionError):
        t.begin(1, AT)
    with pytest.raises(InvalidTransitionError):
        t.finalize(1, AT)


def test_continue_from_carries_the_durable_lifecycle():
    prior = table()
    prior.begin(1, AT)
    prior.commit(1, AT, Outcome.PUBLISHED)
    fresh = table(table_properties={"team": "new"})
    fresh.continue_from(load_two_phase_table(prior.to_dict()))
    fresh.begin(2, AT)
    assert fresh.last_committed_try == 1 and fresh.table_properties == {"team": "new"}
    assert fresh.history[-1].note == "after try 1 committed"
    with pytest.raises(CorruptStateError, match="belongs to"):
        table(key=TransactionKey("x", "y", "z")).continue_from(prior)


def test_round_trip_is_exact():
    t = table(mode="replace", allow_swap=True)
    t.begin(1, AT)
    t.mark_prepared(1, AT, {"row_count": 10, "publish": {"nested": {"a": [1, 2]}}})
    for form in (t.to_dict(), t.to_json(), json.loads(t.to_json())):
        assert load_two_phase_table(form) == t
    assert t.to_dict()["schema_version"] == SCHEMA_VERSION
    assert t.to_dict()["kind"] == "spark_session_catalog"


def _tampered(change) -> dict:
    data = copy.deepcopy(table().to_dict())
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(kind="builtins.eval"), "unknown kind"),
        (lambda d: d.update(kind="os.system"), "unknown kind"),
        (lambda d: d.update(schema_version=SCHEMA_VERSION + 1), "newer than this provider"),
        (lambda d: d.pop("schema_version"), "no integer schema_version"),
        (lambda d: d.pop("target"), "missing fields"),
        (lambda d: d.update(extra="x"), "unexpected fields"),
        (lambda d: d.update(txn_id="0" * 32), "does not match its key"),
        (lambda d: d["key"].update(run_id="other"), "does not match its key"),
        (lambda d: d.update(target="db.t; DROP TABLE x"), "target is invalid"),
        (lambda d: d.update(target="db.__ctas_0123456789abcdef_s1"), "target is invalid"),
        (lambda d: d.update(state="published"), "unknown state"),
        (lambda d: d.update(try_number=-1), "non-negative integer"),
        (lambda d: d.update(conn_id="x y"), "connection id"),
        (lambda d: d["spec"].update(mode="drop"), "spec is invalid"),
        (lambda d: d["spec"].update(table_properties={"owner": "x"}), "spec is invalid"),
        (lambda d: d["spec"].update(partition_by=["a;b"]), "spec is invalid"),
        (lambda d: d["spec"].update(allow_swap="yes"), "allow_swap"),
        (lambda d: d["spec"].pop("mode"), "missing fields"),
        (lambda d: d["history"].append({"try_number": 1}), "missing fields"),
        (lambda d: d.update(details=["x"]), "details must be an object"),
    ],
)
def test_tampered_state_fails_closed(change, message):
    with pytest.raises(CorruptStateError, match=message):
        load_two_phase_table(_tampered(change))


@pytest.mark.parametrize("raw", ["not json", "[]", "null", '"string"', "{}"])
def test_garbage_fails_closed(raw):
    with pytest.raises(CorruptStateError):
        load_two_phase_table(raw)


def test_factory_refuses_what_it_cannot_make_atomic():
    with pytest.raises(AtomicityNotSupportedError, match="StagingTableCatalog"):
        table(table_format="hudi")
    with pytest.raises(AtomicityNotSupportedError, match="no catalog strategy"):
        table(table_format="jdbc")
    with pytest.raises(InvalidInputError, match="mode"):
        table(mode="upsert")
    with pytest.raises(InvalidInputError, match="connection id"):
        table(conn_id="bad id")


def test_staging_names_are_reserved_and_per_try():
    t = table()
    t.begin(3, AT)
    assert t.staging_table().table == f"__ctas_{t.txn_id[:16]}_s3"
    assert t.backup_table(2).table == f"__ctas_{t.txn_id[:16]}_b2"
    assert t.mode is Mode.CREATE


def test_deterministic_query_errors_are_recognised_in_a_failed_jobs_message():
    from airflow_provider_ctas.core.errors import deterministic_condition

    assert deterministic_condition("USER_RAISED_EXCEPTION", "") == "USER_RAISED_EXCEPTION"
    assert deterministic_condition("CAST_INVALID_INPUT.SOMETHING", "") == "CAST_INVALID_INPUT"
    job = "Job aborted due to stage failure: ... org.apache.spark.SparkArithmeticException: [DIVIDE_BY_ZERO] Division"
    assert deterministic_condition("", job) == "DIVIDE_BY_ZERO"
    assert deterministic_condition("", "ExecutorLostFailure (executor 1 exited ...)") is None
    assert deterministic_condition("TABLE_OR_VIEW_NOT_FOUND", "") is None
