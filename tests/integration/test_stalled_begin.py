"""An older try that stalls inside its begin, before it has staging of its own, while a newer try
begins (a cleared task instance whose driver carries on): the newer try's begin finds nothing of it
to revoke, so the older try must find the newer try's staging right before its publish and not
publish. Two tries of one transaction run through the real phases in the test's own Spark session;
the Delta and Iceberg cases run as DAG tries in ``test_delta.py`` and ``test_iceberg.py``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import fresh, table_exists
from tests.support.phases import executor_for, held_at

pytestmark = pytest.mark.integration


def _query(try_number: int, rows: int, partitioned: bool, extra: str = "") -> str:
    return (
        f"SELECT id, {try_number} AS written_by_try{', id % 2 AS ds' if partitioned else ''}{extra} FROM range({rows})"
    )


@pytest.mark.parametrize("publish", ["create", "flip", "swap", "overwrite_partitions"])
def test_a_try_stalled_inside_its_begin_cannot_publish_once_a_newer_try_has_begun(publish, spark, database, tmp_path):
    """Try 1 is held after analysing its query, before it creates its staging; try 2 begins and
    prepares; released, try 1 creates its staging, writes it and reaches its publish: it fails
    ``FENCED`` with the table as it was, and try 2 then publishes. Without the check the older try's
    publish went through: a `create` renamed its staging into the target (try 2 then reported
    ``already_published``), a flip, a swap or a partition switch replaced the table with try 1's rows."""
    target, partitioned = f"{database}.stalled_begin_{publish}", publish == "overwrite_partitions"
    mode = {"flip": "replace", "swap": "replace"}.get(publish, publish)
    options: dict[str, Any] = {"mode": mode, "partition_by": ["ds"]} if partitioned else {"mode": mode}
    extra = ", 'x' AS new_column" if publish == "swap" else ""  # a new shape: swapped, with allow_swap
    if publish == "swap":
        options["allow_swap"] = True
    if mode != "create":
        seed = _query(0, 3, partitioned)
        spark.sql(f"CREATE TABLE {target} USING parquet {'PARTITIONED BY (ds) ' if partitioned else ''}AS {seed}")
    key = TransactionKey("in_process_dag", "ctas", f"run_{uuid.uuid4().hex}")
    flag, progress = tmp_path / "go", tmp_path / "progress"
    older = executor_for(fresh(spark), target, _query(1, 7, partitioned, extra), key=key, try_number=1,
                         faults={"before_staging": {"wait_for": str(flag)}, "progress_file": str(progress)},
                         **options)  # fmt: skip
    newer = executor_for(fresh(spark), target, _query(2, 9, partitioned, extra), key=key, try_number=2, **options)
    with held_at(older, "before_staging", flag, progress) as failures:
        for phase in ("begin", "prepare"):
            newer.run(phase, PhaseReport(phase, "ok", 0.0))

    assert len(failures) == 1 and isinstance(failures[0], FencedError), failures
    assert "try 1 must not publish" in str(failures[0]), failures[0]
    if mode == "create":
        assert not table_exists(spark, target), "try 1 published"
    else:
        assert {r["written_by_try"] for r in fresh(spark).table(target).collect()} == {0}, "try 1 published"
    newer.run("commit", PhaseReport("commit", "ok", 0.0))
    assert newer.ctx.progress.published
    rows = fresh(spark).table(target).collect()
    assert len(rows) == 9 and {r["written_by_try"] for r in rows} == {2}
