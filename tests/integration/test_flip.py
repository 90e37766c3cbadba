"""The flip's fence re-check, run through the real phases in the test's session against the
metastore service: a newer try's takeover right after the location changed (its begin marks this
try's staging directory revoked) must put the target back as it was, and this try must fail as fenced. The location
and the provenance change in one metastore call, and go back in one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient
from airflow_provider_ctas.catalogs.session_catalog.executor import SessionCatalogExecutor
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.catalog_entry import described
from tests.support.catalog import count, fresh
from tests.support.phases import executor_for, held_at

pytestmark = pytest.mark.integration


def _replace(spark, target: str, faults: dict) -> SessionCatalogExecutor:
    return executor_for(spark, target, "SELECT id FROM range(7)", faults=faults, mode="replace",
                        table_properties={"team": "ledger"})  # fmt: skip


def _revoke_as_a_newer_try(spark, executor: SessionCatalogExecutor) -> None:
    """What a newer try's begin does to this try: its staging directory's marker says revoked."""
    client = CatalogClient(fresh(spark))
    location = executor.ctx.staging_directory or ""
    marker = client.read_marker(location)
    assert marker is not None and marker.revoked_by is None
    client.fs.write_text(f"{location}/{markers.MARKER_FILE}", dataclasses.replace(marker, revoked_by=2).to_json())


def test_a_takeover_right_after_the_location_change_puts_the_target_back(spark, database, tmp_path: Path):
    target = f"{database}.contested"
    spark.sql(f"CREATE TABLE {target} USING parquet TBLPROPERTIES ('owner_note'='kept') AS SELECT id FROM range(3)")
    before = described(fresh(spark), TableRef.parse(target))
    flag, progress = tmp_path / "go", tmp_path / "progress"
    executor = _replace(
        spark,
        target,
        {"after_location_change": {"wait_for": str(flag)}, "progress_file": str(progress)},
    )
    with held_at(executor, "after_location_change", flag, progress) as failures:
        flipped = described(fresh(spark), TableRef.parse(target))
        staging = executor.ctx.table.staging_table()
        assert flipped is not None and (flipped.location or "").rstrip("/").endswith(f"/{staging.table}"), "flipped"
        # The provenance came with the location, in the same metastore call.
        assert flipped.properties.get(markers.TXN_ID) == executor.ctx.table.txn_id
        _revoke_as_a_newer_try(spark, executor)

    assert len(failures) == 1 and isinstance(failures[0], FencedError), failures
    after = described(fresh(spark), TableRef.parse(target))
    assert after is not None and before is not None
    assert after.location == before.location
    assert markers.TXN_ID not in after.properties
    assert after.properties["owner_note"] == "kept"
    assert count(spark, target) == 3


@pytest.mark.parametrize("held_at_point", ["publish_checked", "publish_between_partitions"])
def test_a_partition_switch_undone_after_a_newer_try_switched_the_partition_keeps_the_newer_version(
    held_at_point, spark, database, tmp_path: Path
):
    """The chaos soak's window, made deterministic. ``publish_checked``: this try checks its
    staging, then stalls right before its switch (a cleared task, a timeout) while a newer try
    publishes the partition; released, it switches, its re-check finds it revoked, and it switches
    back to what the partition was right before its switch (the newer try's version), not to what it
    read before it stalled. ``publish_between_partitions`` (seed 611251585, where the table was left
    with 350 of 400 rows, two partitions old): held right after its switch while a newer version is
    switched in, its switch back leaves that version standing."""
    target = f"{database}.contested_parts"
    spark.sql(f"CREATE TABLE {target} USING parquet PARTITIONED BY (ds) AS SELECT id, 'a' AS ds FROM range(3)")
    flag, progress = tmp_path / "go", tmp_path / "progress"
    executor = executor_for(
        spark, target, "SELECT id, 'a' AS ds FROM range(7)", mode="overwrite_partitions", partition_by=["ds"],
        faults={held_at_point: {"wait_for": str(flag)}, "progress_file": str(progress)},
    )  # fmt: skip
    newer = tmp_path / "newer_try" / "ds=a"
    with held_at(executor, held_at_point, flag, progress) as failures:
        assert held_at_point in progress.read_text()
        if held_at_point == "publish_between_partitions":
            assert count(spark, target) == 7, "this try's switch is in"
        # A newer try's begin revokes this try's staging; its publish switches the partition.
        _revoke_as_a_newer_try(spark, executor)
        spark.range(50).write.parquet(str(newer))
        spark.sql(f"ALTER TABLE {target} PARTITION (ds = 'a') SET LOCATION '{newer}'")  # a path: no %3D
        assert count(spark, target) == 50

    assert len(failures) == 1 and isinstance(failures[0], FencedError), failures
    assert count(spark, target) == 50, "the newer try's publish stands"


def test_a_flip_undone_after_a_newer_try_flipped_the_table_again_keeps_the_newer_version(
    spark, database, tmp_path: Path
):
    """As the partition switch's case above, for a flip: held right after its location change, a
    newer try revokes this one and flips the table again; released, this try's undo leaves it."""
    target = f"{database}.reflipped"
    spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT id FROM range(3)")
    flag, progress = tmp_path / "go", tmp_path / "progress"
    executor = _replace(
        spark, target, {"after_location_change": {"wait_for": str(flag)}, "progress_file": str(progress)}
    )
    newer = tmp_path / "newer_try"
    with held_at(executor, "after_location_change", flag, progress) as failures:
        assert count(spark, target) == 7, "this try's flip is in"
        _revoke_as_a_newer_try(spark, executor)
        spark.range(50).write.parquet(str(newer))
        spark.sql(f"ALTER TABLE {target} SET LOCATION '{newer}'")
        assert count(spark, target) == 50

    assert len(failures) == 1 and isinstance(failures[0], FencedError), failures
    assert count(spark, target) == 50, "the newer try's flip stands"
