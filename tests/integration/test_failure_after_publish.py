"""A driver that fails right after its publish (the publish stands; the task then finds the table
published and succeeds) still removes what older tries left for that publish to remove: the chaos
soak's seed 1167869720 (a try killed mid-write, the next one failing right after its publish) left
the killed try's staging directory until a garbage-collection pass."""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table
from airflow_provider_ctas.core.protocol import RUN_PHASES, PhaseReport, PhaseRequest
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.driver.phases import run_phases
from tests.support.catalog import fresh
from tests.support.phases import QuietReporter, executor_for

pytestmark = pytest.mark.integration


def test_a_failure_right_after_the_publish_still_removes_older_tries_staging(spark, database):
    target = f"{database}.failed_after_publish"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id, 0 AS written_by_try FROM range(3)")
    key = TransactionKey("in_process_dag", "ctas", f"run_{uuid.uuid4().hex}")
    older = executor_for(fresh(spark), target, "SELECT id, 1 AS written_by_try FROM range(5)", key=key, mode="replace")
    for phase in ("begin", "prepare"):  # then its task is lost: its staging stays for the next try
        older.run(phase, PhaseReport(phase, "ok", 0.0))
    left = Path(urlparse(older.ctx.staging_directory or "").path)
    assert left.is_dir()

    txn = create_two_phase_table(key=key, conn_id="spark_default", target=target, table_format="parquet",
                                 mode="replace")  # fmt: skip
    txn.begin(2, "2024-01-01T00:00:00+00:00")
    request = PhaseRequest(phases=RUN_PHASES, table=txn.to_dict(), sql="SELECT id, 2 AS written_by_try FROM range(7)",
                           faults={"after_publish": {"raise": "a failure right after the publish"}})  # fmt: skip
    result = run_phases(fresh(spark), request, QuietReporter())

    assert not result.ok and result.error is not None and "right after the publish" in result.error["message"]
    rows = fresh(spark).table(target).collect()
    assert len(rows) == 7 and {r["written_by_try"] for r in rows} == {2}, "published"
    assert not left.exists(), "the older try's staging directory, deferred by the newer try's begin"
