"""What follows a publish: a step run beside the others is waited for and never turns the publish
into a failure."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from tests.support.reporter import RecordingReporter


def context(log: RecordingReporter) -> RunContext:
    """Only what the after-publish steps use: the log and the details."""
    none = cast(Any, None)
    return RunContext(spark=none, table=none, request=none, log=cast(Any, log), catalog=none)


def test_a_step_run_meanwhile_runs_beside_the_caller_and_settle_waits_for_it() -> None:
    ctx, started, release, done = context(RecordingReporter()), threading.Event(), threading.Event(), []

    def slow() -> None:
        started.set()
        release.wait(10)
        time.sleep(0.05)
        done.append("stamped")

    ctx.after_publish_meanwhile("record provenance", slow)
    assert started.wait(10), "the step started"
    ctx.after_publish("retire the old version", lambda: done.append("retired"))
    assert done == ["retired"], "the caller went on while the step waited"
    release.set()
    ctx.settle()
    assert done == ["retired", "stamped"], "settle returned only once the step had finished"
    assert ctx.meanwhile == []


def test_a_step_run_meanwhile_that_fails_is_reported_not_raised() -> None:
    log = RecordingReporter()
    ctx = context(log)

    def failing() -> None:
        raise RuntimeError("metastore unavailable\nstack")

    ctx.after_publish_meanwhile("record provenance", failing)
    ctx.settle()
    assert ctx.details["finalize_pending"] == ["record provenance: metastore unavailable"]
    assert log.warnings == ["published, but could not record provenance: metastore unavailable"]
