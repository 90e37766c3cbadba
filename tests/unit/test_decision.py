"""The commit handshake: sealed messages, refusals, and both ends over a real loopback socket."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_ctas.core.decision import (
    ANNOUNCEMENT,
    Kind,
    Message,
    announced_port,
    is_commit_for,
    new_key,
    new_nonce,
    seal,
    unseal,
)
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
    field=st.sampled_from(["kind", "txn", "try", "nonce", "payload"]),
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
    """The driver's end, recording what it was told, as phases.py uses it; ``attach`` opens the channel
    the way the coordinator's settings say: the driver connects (client mode) or listens and the task
    connects to the port it announced (cluster deploy mode)."""

    def __init__(self, settings, txn=TXN, try_number=TRY, durable=False):
        self.lost_reasons: list[str] = []
        self.link = CoordinatorLink(settings, txn, try_number, self.lost_reasons.append, durable=durable)

    def attach(self, coordinator: CommitCoordinator) -> None:
        if not self.link.listens:
            self.link.connect(lambda line: None)
            return
        announced: list[int | None] = []
        failure: list[BaseException] = []

        def listen() -> None:
            try:
                self.link.connect(lambda line: announced.append(announced_port(line, txn_id=TXN, try_number=TRY)))
            except CoordinatorLostError as exc:
                failure.append(exc)

        listener = threading.Thread(target=listen)
        listener.start()
        deadline = time.monotonic() + 5
        while not announced and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            coordinator.connect("127.0.0.1", announced[0] or 0)
        finally:
            listener.join(10)
        if failure:
            raise failure[0]


@pytest.fixture(params=["driver connects", "task connects"])
def listens(request) -> bool:
    return request.param == "task connects"


def test_the_live_task_decides_commit_quickly(listens):
    with CommitCoordinator(TXN, TRY, LOG, driver_listens=listens) as coordinator:
        driver = Driver(coordinator.settings())
        driver.attach(coordinator)
        seconds = driver.link.await_commit()
        driver.link.send_result('{"ok": true}')
        time.sleep(0.2)
        driver.link.close()
    assert coordinator.decision is Kind.COMMIT
    assert seconds < 0.05  # the handshake's cost at publish (issue: at most 50 ms)
    assert driver.lost_reasons == []
    assert coordinator.result == ('{"ok": true}' if listens else None), "a result travels only where the task connected"


def test_a_refused_task_answers_abort(listens):
    with CommitCoordinator(TXN, TRY, LOG, driver_listens=listens) as coordinator:
        driver = Driver(coordinator.settings())
        driver.attach(coordinator)
        coordinator.refuse("on_kill")
        with pytest.raises(CoordinatorLostError, match="decided abort"):
            driver.link.await_commit()
    assert driver.lost_reasons == ["the task decided abort"]


def test_a_task_that_goes_away_is_noticed_without_waiting_for_the_decision(listens):
    coordinator = CommitCoordinator(TXN, TRY, LOG, driver_listens=listens).__enter__()
    driver = Driver(coordinator.settings())
    driver.attach(coordinator)
    time.sleep(0.2)
    coordinator.__exit__(None, None, None)  # the socket closes, as when the kernel reaps a killed task
    deadline = time.monotonic() + 5
    while not driver.lost_reasons and time.monotonic() < deadline:
        time.sleep(0.05)
    assert driver.lost_reasons and "gone" in driver.lost_reasons[0]
    with pytest.raises(CoordinatorLostError, match="gone"):
        driver.link.await_commit()


@pytest.mark.parametrize("aborted", [False, True])
def test_a_durable_driver_writes_on_for_the_next_try_only_in_cluster_mode_and_never_publishes(listens, aborted):
    """durable=True: a lost task leaves a listening (cluster-mode) driver writing on for the next try;
    a connecting (client-mode) driver, on the lost worker, stops; a task that said abort stops both.
    Either way the driver never gets a commit."""
    coordinator = CommitCoordinator(TXN, TRY, LOG, driver_listens=listens).__enter__()
    driver = Driver(coordinator.settings(), durable=True)
    driver.attach(coordinator)
    if aborted:
        coordinator.refuse("on_kill")
    time.sleep(0.2)
    coordinator.__exit__(None, None, None)
    deadline = time.monotonic() + 5
    while not driver.lost_reasons and time.monotonic() < deadline:
        time.sleep(0.05)
    assert driver.lost_reasons
    assert driver.link.writing_on is (listens and not aborted)
    with pytest.raises(CoordinatorLostError):
        driver.link.await_commit()


def test_silence_past_the_lease_is_a_lost_task(listens):
    with CommitCoordinator(TXN, TRY, LOG, heartbeat_seconds=60, lease_seconds=1.5, driver_listens=listens) as c:
        driver = Driver(c.settings())
        driver.attach(c)
        time.sleep(3.5)
        assert driver.lost_reasons == ["no heartbeat from the task for 2s"]


def test_a_driver_of_another_try_gets_no_commit():
    with CommitCoordinator(TXN, TRY, LOG) as coordinator:
        stranger = Driver(coordinator.settings(), try_number=TRY + 1)
        stranger.link.connect(lambda line: None)  # its hello does not verify: the task drops it
        with pytest.raises(CoordinatorLostError):
            stranger.link.await_commit()
        assert coordinator.decision is None
        # The real driver still gets its answer.
        driver = Driver(coordinator.settings())
        driver.attach(coordinator)
        driver.link.await_commit()
    assert coordinator.decision is Kind.COMMIT


def test_a_listening_driver_opens_only_to_its_task_and_gives_up_writing_nothing():
    """Cluster deploy mode: a connection without the task's key, or of another try, is dropped and
    the driver keeps waiting for its own task; with none, it stops at its deadline, before begin."""
    with CommitCoordinator(TXN, TRY, LOG, driver_listens=True, accept_seconds=3) as coordinator:
        driver = Driver(coordinator.settings())
        impostor = CommitCoordinator(TXN, TRY, LOG, driver_listens=True)  # its own key
        other_try = CommitCoordinator(TXN, TRY + 1, LOG, driver_listens=True)
        announced: list[int | None] = []
        listener = threading.Thread(
            target=driver.link.connect,
            args=(lambda line: announced.append(announced_port(line, txn_id=TXN, try_number=TRY)),),
        )
        listener.start()
        deadline = time.monotonic() + 5
        while not announced and time.monotonic() < deadline:
            time.sleep(0.01)
        for stranger in (impostor, other_try):
            with pytest.raises(CoordinatorLostError):
                stranger.connect("127.0.0.1", announced[0] or 0)
        coordinator.connect("127.0.0.1", announced[0] or 0)
        listener.join(10)
        driver.link.await_commit()
    assert coordinator.decision is Kind.COMMIT

    lonely = Driver({"driver_listens": True, "accept_seconds": 0.5, "key": new_key(), "lease_seconds": 30,
                     "decision_seconds": 60})  # fmt: skip
    with pytest.raises(CoordinatorLostError, match=r"did not connect within 0s: .* reach this driver's host on port"):
        lonely.link.connect(lambda line: None)


def test_the_announcement_names_its_port_for_its_try_only():
    line = ANNOUNCEMENT.format(port=41234, txn_id=TXN, try_number=TRY)
    log = f"INFO starting\n[airflow-ctas] INFO: {line}\nmore"
    assert announced_port(log, txn_id=TXN, try_number=TRY) == 41234
    assert announced_port(log, txn_id=TXN, try_number=TRY + 10) is None
    assert announced_port(log.replace(TXN, "b" * 32), txn_id=TXN, try_number=TRY) is None
    assert announced_port(log.replace("41234", "99999"), txn_id=TXN, try_number=TRY) is None
    assert announced_port("nothing yet", txn_id=TXN, try_number=TRY) is None


def test_only_a_result_carries_a_payload():
    key = new_key()
    line = seal(key, Message(Kind.RESULT, TXN, TRY, payload='{"ok": true}')).rstrip(b"\n")
    assert unseal(key, line, txn_id=TXN, try_number=TRY).payload == '{"ok": true}'
    smuggled = seal(key, Message(Kind.COMMIT, TXN, TRY, "n1", payload="x")).rstrip(b"\n")
    with pytest.raises(CoordinatorLostError, match="carries a payload"):
        unseal(key, smuggled, txn_id=TXN, try_number=TRY)


def test_a_forged_commit_is_refused():
    with CommitCoordinator(TXN, TRY, LOG, heartbeat_seconds=60) as coordinator:
        settings = {**coordinator.settings(), "key": new_key()}  # a peer without the task's key
        driver = Driver(settings)
        driver.link.connect(lambda line: None)
        with pytest.raises(CoordinatorLostError):
            driver.link.await_commit()
    assert coordinator.decision is None


def test_refusal_and_commit_race_to_exactly_one_decision(listens):
    for _ in range(20):
        with CommitCoordinator(TXN, TRY, LOG, driver_listens=listens) as coordinator:
            driver = Driver(coordinator.settings())
            driver.attach(coordinator)
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
