"""Two creators of one table rename into its name one at a time. The metastore moves a managed
table's directory before it commits a rename, and a rename that fails at its commit moves the
directory back: with two renames into one name at once, the loser moved the winner's directory away
and left the published table without its data (seen in CI: a backfill's first dates on Delta). Both
creators run through the real phases in the test's Spark session, against the metastore service."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.gc_ledger import GcParams
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.metastore.name_claim import claim_of
from airflow_provider_ctas.catalogs.session_catalog.gc import SessionCatalogGc
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import fresh, leftovers, table_exists
from tests.support.phases import QuietReporter, executor_for, held_at, run_all, run_on_thread

pytestmark = pytest.mark.integration


def _query(writer: int) -> str:
    return f"SELECT id, {writer} AS writer FROM range({10 * writer})"


def test_a_creator_waits_for_another_creator_s_rename_into_the_same_name(spark, database, tmp_path: Path):
    """overwrite_partitions of two task instances on a missing table: writer 1 is held inside its
    rename's claim; writer 2 reaches its own rename and waits rather than renaming beside it. Once
    writer 1 has created the table, writer 2 overwrites its partition in it: both succeed, the
    table has both partitions, and no claim is left."""
    target = f"{database}.claimed_first_use"
    options: dict[str, Any] = {"mode": "overwrite_partitions", "partition_by": ["writer"]}
    flag, first, second = tmp_path / "go", tmp_path / "first.progress", tmp_path / "second.progress"
    writer_1 = executor_for(fresh(spark), target, _query(1), faults={"progress_file": str(first),
                            "publish_before_rename": {"wait_for": str(flag)}}, **options)  # fmt: skip
    reached = {"progress_file": str(second), "before_publish": {}}
    writer_2 = executor_for(fresh(spark), target, _query(2), faults=reached, **options)
    with held_at(writer_1, "publish_before_rename", flag, first) as held_failures:
        second_thread, failures = run_on_thread(writer_2)
        for _ in range(600):
            if second.exists() and "before_publish" in second.read_text():
                break
            time.sleep(0.1)
        time.sleep(3)  # writer 2's publish: without the claim its rename is done well within this
        assert "before_publish" in second.read_text(), "writer 2 never reached its publish"
        assert second_thread.is_alive(), f"writer 2 finished while writer 1 held the name: {failures}"
        assert not table_exists(fresh(spark), target), "writer 2 renamed into the name writer 1 holds"
    second_thread.join(timeout=300)

    assert not held_failures and not failures, (held_failures, failures)
    assert writer_1.ctx.progress.published and writer_2.ctx.progress.published
    rows = fresh(spark).table(target).groupBy("writer").count().collect()
    assert {r["writer"]: r["count"] for r in rows} == {1: 10, 2: 20}
    assert not table_exists(fresh(spark), claim_of(TableRef.parse(target)).qualified)
    assert leftovers(spark, database) == []


def test_a_claim_left_by_a_killed_try_is_taken_over_by_the_next_and_removed_by_gc(spark, database):
    """A try killed inside its claim leaves the claim: the next try of the same task instance takes
    it over at once and publishes; one left on a name nobody creates again goes with garbage
    collection, and a view under a claim's name without this provider's markers stays."""
    target, key = f"{database}.claim_left", TransactionKey("in_process_dag", "ctas", f"run_{uuid.uuid4().hex}")
    killed = executor_for(fresh(spark), target, _query(1), key=key, try_number=1, mode="create")
    claim = claim_of(TableRef.parse(target))
    left = killed.ctx.table.marker_properties(created_at=now_iso(), provider_version="0")  # fresh
    _leave_claim(spark, claim, left)
    started = time.monotonic()
    run_all(executor_for(fresh(spark), target, _query(2), key=key, try_number=2, mode="create"))
    assert time.monotonic() - started < 50, "the next try waited for its own task instance's claim"
    assert fresh(spark).table(target).count() == 20
    assert not table_exists(fresh(spark), claim.qualified), "the taken-over claim was not released"

    never = TableRef.parse(f"{database}.never_created")
    elsewhere = claim_of(never)
    _leave_claim(spark, elsewhere, {**left, markers.TARGET: never.qualified})
    impostor = claim_of(TableRef.parse(f"{database}.someone_elses"))
    spark.sql(f"CREATE VIEW {impostor.quoted} AS SELECT 1 AS claimed")
    report = SessionCatalogGc(fresh(spark), GcParams([database], 0, dry_run=False), QuietReporter()).run()
    removed = {e["what"] for e in report["entries"] if e["action"] == "removed"}
    assert elsewhere.qualified in removed, report
    assert not table_exists(fresh(spark), elsewhere.qualified)
    assert table_exists(fresh(spark), impostor.qualified), "a view without this provider's markers was removed"
    spark.sql(f"DROP VIEW {impostor.quoted}")


def _leave_claim(spark: Any, claim: TableRef, properties: dict[str, str]) -> None:
    pairs = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    spark.sql(f"CREATE VIEW {claim.quoted} TBLPROPERTIES ({pairs}) AS SELECT 1 AS claimed")
