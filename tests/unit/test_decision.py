"""The commit handshake: sealed messages, refusals, and both ends over a real loopback socket."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_ctas.core.decision import Kind, Message, is_commit_for, new_key, new_nonce, seal, unseal
from airflow_provider_ctas.core.errors import CoordinatorLostError
from airflow_provider_ctas.runners.coordinator import CommitCoordinator
from airflow_provider_ctas.spark.coordinator_link import CoordinatorLink

TXN, TRY = "a" * 32, 2
LOG = logging.getLogger("test-decision")


def test_a_sealed_message_opens_only_for_its_transaction_try_and_key():
    key = new_key()
    line = seal(key, Message(Kind.COMMIT, TXN, TRY, "n1")).rstrip(b"\n")
    assert unseal(key, line, txn_id=TXN, try_number=TRY) == Message(Kind.COMMIT, TXN, TRY, "n1")
    with pytest.raises(CoordinatorLostError, match="seal does not verify"):
        unseal(new_key(), line, txn_id=TXN, try_number=TRY)
    with pytest.raises(CoordinatorLostError, match="try 2; this is"):
        unseal(key, line, txn_id=TXN, try_number=3)
    with pytest.raises(CoordinatorLostError, match="transaction"):
        unseal(key, line, txn_id="b" * 32, try_number=TRY)


def test_a_tampered_message_is_refused():
    key = new_key()
    data = json.loads(seal(key, Message(Kind.ABORT, TXN, TRY)))
    data["kind"] = "commit"
    with pytest.raises(CoordinatorLostError, match="seal"):
        unseal(key, json.dumps(data).encode(), txn_id=TXN, try_number=TRY)
    data = json.loads(seal(key, Message(Kind.COMMIT, TXN, TRY, "x")))
    data["try"] = True  # bool is an int in Python; not a try number
    with pytest.raises(CoordinatorLostError):
        unseal(key, json.dumps(data).encode(), txn_id=TXN, try_number=1)


def test_a_commit_counts_only_for_the_report_it_answers():
    commit = Message(Kind.COMMIT, TXN, TRY, "n1")
    assert is_commit_for(commit, "n1")
    assert not is_commit_for(commit, "n2")  # replayed against a newer report
    assert not is_commit_for(Message(Kind.COMMIT, TXN, TRY, ""), "")
    assert not is_commit_for(Message(Kind.HEARTBEAT, TXN, TRY, "n1"), "n1")


@given(st.binary(max_size=600))
def test_garbage_never_opens(blob):
    with pytest.raises(CoordinatorLostError):
        unseal(new_key(), blob, txn_id=TXN, try_number=TRY)


@given(
    kind=st.sampled_from(list(Kind)),
    txn=st.text(max_size=40),
    try_number=st.integers(),
    nonce=st.text(max_size=40),
    field=st.sampled_from(["kind", "txn", "try", "nonce"]),
    value=st.one_of(st.text(max_size=20), st.integers(), st.none(), st.booleans()),
)
def test_any_changed_field_breaks_the_seal(kind, txn, try_number, nonce, field, value):
    key = new_key()
    data = json.loads(seal(key, Message(kind, txn, try_number, nonce)))
    if data[field] == value and type(data[field]) is type(value):
        return
    data[field] = value
    with pytest.raises(CoordinatorLostError):
        unseal(key, json.dumps(data).encode(), txn_id=txn, try_number=try_number)


class Driver:
    """The driver's end, recording what it was told, as phases.py uses it."""

    def __init__(self, settings, txn=TXN, try_number=TRY):
        self.lost_reasons: list[str] = []
        self.link = CoordinatorLink(settings, txn, try_number, self.lost_reasons.append)


def test_the_live_task_decides_commit_quickly():
    with CommitCoordinator(TXN, TRY, LOG) as coordinator:
        driver = Driver(coordinator.settings())
        driver.link.connect()
        seconds = driver.link.await_commit()
        driver.link.close()
    assert coordinator.decision is Kind.COMMIT
    assert seconds < 0.05  # the handshake's cost at publish (issue: at most 50 ms)
    assert driver.lost_reasons == []


def test_a_refused_task_answers_abort():
    with CommitCoordinator(TXN, TRY, LOG) as coordinator:
        driver = Driver(coordinator.settings())
        driver.link.connect()
        coordinator.refuse("on_kill")
        with pytest.raises(CoordinatorLostError, match="decided abort"):
            driver.link.await_commit()
    assert driver.lost_reasons == ["the task decided abort"]


def test_a_task_that_goes_away_is_noticed_without_waiting_for_the_decision():
    coordinator = CommitCoordinator(TXN, TRY, LOG).__enter__()
    driver = Driver(coordinator.settings())
    driver.link.connect()
    time.sleep(0.2)
    coordinator.__exit__(None, None, None)  # the socket closes, as when the kernel reaps a killed task
    deadline = time.monotonic() + 5
    while not driver.lost_reasons and time.monotonic() < deadline:
        time.sleep(0.05)
    assert driver.lost_reasons and "gone" in driver.lost_reasons[0]
    with pytest.raises(CoordinatorLostError, match="gone"):
        driver.link.await_commit()


def test_silence_past_the_lease_is_a_lost_task():
    with CommitCoordinator(TXN, TRY, LOG, heartbeat_seconds=60, lease_seconds=1.5) as coordinator:
        driver = Driver(coordinator.settings())
        driver.link.connect()
        time.sleep(3.5)
        assert driver.lost_reasons == ["no heartbeat from the task for 2s"]


def test_a_driver_of_another_try_gets_no_commit():
    with CommitCoordinator(TXN, TRY, LOG) as coordinator:
        stranger = Driver(coordinator.settings(), try_number=TRY + 1)
        stranger.link.connect()  # its hello does not verify: the task drops it
        with pytest.raises(CoordinatorLostError):
            stranger.link.await_commit()
        assert coordinator.decision is None
        # The real driver still gets its answer.
        driver = Driver(coordinator.settings())
        driver.link.connect()
        driver.link.await_commit()
    assert coordinator.decision is Kind.COMMIT


def test_a_forged_commit_is_refused():
    with CommitCoordinator(TXN, TRY, LOG, heartbeat_seconds=60) as coordinator:
        settings = {**coordinator.settings(), "key": new_key()}  # a peer without the task's key
        driver = Driver(settings)
        driver.link.connect()
        with pytest.raises(CoordinatorLostError):
            driver.link.await_commit()
    assert coordinator.decision is None


def test_refusal_and_commit_race_to_exactly_one_decision():
    for _ in range(20):
        with CommitCoordinator(TXN, TRY, LOG) as coordinator:
            driver = Driver(coordinator.settings())
            driver.link.connect()
            refusal = threading.Thread(target=coordinator.refuse, args=("on_kill",))
            outcome: list[str] = []

            def ask(driver=driver, outcome=outcome):
                try:
                    driver.link.await_commit()
                    outcome.append("commit")
                except CoordinatorLostError:
                    outcome.append("abort")

            asker = threading.Thread(target=ask)
            asker.start()
            refusal.start()
            asker.join(10)
            refusal.join(10)
        assert coordinator.decision is not None
        assert outcome == [coordinator.decision.value], (outcome, coordinator.decision)


def test_nonces_do_not_repeat():
    assert len({new_nonce() for _ in range(1000)}) == 1000
