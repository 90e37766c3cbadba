"""Waiting on something another process does, with a budget: a wait that runs out says what it
waited for, how long, and what it saw instead, so a slow machine's failure can be told from a bug's."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(
    what: str,
    check: Callable[[], T | None],
    timeout: float,
    interval: float = 0.2,
    observe: Callable[[], Any] | None = None,
) -> T:
    """``check()``'s first truthy value, polled every ``interval`` seconds for up to ``timeout``.
    Out of time, fails with ``what``, the budget and the last value seen (or ``observe()``, when
    the check's value says too little, e.g. the applications the cluster does run)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = check()
        if seen:
            return seen
        if time.monotonic() >= deadline:
            saw = observe() if observe is not None else seen
            raise AssertionError(f"{what}: not within {timeout:.0f} s; saw {saw!r}")
        time.sleep(interval)
