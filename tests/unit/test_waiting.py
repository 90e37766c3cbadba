from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.waiting import wait_until


def test_returns_the_first_truthy_value_the_check_gives():
    values: Iterator[Any] = iter([None, [], {"state": "FINISHED"}])
    assert wait_until("the app ends", lambda: next(values), timeout=5, interval=0) == {"state": "FINISHED"}


def test_out_of_time_it_names_what_it_waited_for_its_budget_and_what_it_saw():
    polls = itertools.count()
    with pytest.raises(AssertionError, match=r"the app ends: not within 0 s; saw \[\]"):
        wait_until("the app ends", lambda: [] if next(polls) < 10**6 else ["never"], timeout=0.05, interval=0.01)


def test_an_observer_says_more_than_a_false_check():
    with pytest.raises(AssertionError, match=r"saw \['other-app'\]"):
        wait_until("my app runs", lambda: False, timeout=0, observe=lambda: ["other-app"])
