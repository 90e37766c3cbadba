"""An existing target: one Delta commit (``CREATE OR REPLACE``, or a dynamic partition overwrite)
of the query's rows, or of the checked staging table's (a second write: what was checked is what
is published), carrying this try's application version, which Delta skips or refuses once a newer
try has begun; the staging table is then dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.delta.plan import DeltaPlan, Publish
from airflow_provider_ctas.catalogs.delta.run import DeltaRun
from airflow_provider_ctas.catalogs.delta.staging import drop_staging, require_own_staging, staging_of
from airflow_provider_ctas.catalogs.delta.table import FORMAT, write_version
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.provenance import new_table_properties
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.spark.comments import read_comments, set_comments, with_column_comments
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def publish_in_place(run: DeltaRun, plan: DeltaPlan, checks: dict[str, str], report: PhaseReport) -> None:
    table, target = run.table, run.table.target
    partial = table.mode is Mode.OVERWRITE_PARTITIONS
    if plan.stages:
        require_own_staging(run, plan)
    run.fault("before_write")
    version = write_version(table.try_number)
    with run.engine.progress(f"commit {target}", run.log), run.user_metadata():
        if partial:
            run.fenced(run.with_app(_source(run, plan).writeTo(target.quoted), version).overwritePartitions)
        else:
            writer = _writer(run, plan, checks, created_at=now_iso())
            run.fenced(run.with_app(writer, version).createOrReplace)
    commit = run.logged_commit(target.quoted, plan.target_location)
    if commit is None:
        # Delta skips, without an error, a write whose version is not above the one recorded.
        raise FencedError(
            f"a newer try of this task instance raised the fence on {target}; Delta skipped try "
            f"{table.try_number}'s write"
        )
    run.progress.publish()
    run.details["publish"] = {"mechanism": Publish.IN_PLACE.value, "version": commit.version}
    what = "partitions overwritten" if partial else "replaced"
    report.touched.append(f"{target} ({what}: Delta version {commit.version}, {commit.rows} rows)")
    if partial and table.comments:
        _set_comments(run, report)
    if plan.stages:  # published: the staging table has served
        staging = staging_of(run, plan)
        first = plan.adopted.name_try if plan.adopted else table.try_number
        try:
            report.touched += drop_staging(run, up_to=table.try_number, first=first)
        except Exception as exc:  # noqa: BLE001 - published; the next try or GC drops it
            run.log.warning(f"{staging} not dropped after the publish: {first_line(exc)}")


def _source(run: DeltaRun, plan: DeltaPlan) -> DataFrame:
    """What an in-place publish writes: the staging table's rows (checked, kept or adopted), or the query's."""
    return run.spark.table(staging_of(run, plan).quoted) if plan.stages else run.query()


def _writer(run: DeltaRun, plan: DeltaPlan, checks: dict[str, str], *, created_at: str) -> Any:
    """A DataFrameWriterV2 that creates the target from what this try publishes, with its markers
    (and the checks' summary), the user's table properties and partitioning."""
    from pyspark.sql.functions import col

    table = run.table
    writer = with_column_comments(_source(run, plan), plan.comments).writeTo(table.target.quoted).using(FORMAT)
    described = {"comment": plan.comments.table} if plan.comments.table is not None else {}
    for key, value in {**new_table_properties(table, created_at), **checks, **described}.items():
        writer = writer.tableProperty(key, value)
    if table.partition_by:
        writer = writer.partitionedBy(*(col(c) for c in table.partition_by))
    return writer


def _set_comments(run: DeltaRun, report: PhaseReport) -> None:
    """After a partition overwrite (which keeps the table's metadata): the comments it names."""
    target = run.table.target
    try:
        with run.user_metadata():
            changes = run.table.comments.changes_to(read_comments(run.spark, target))
            report.touched += [f"{target} ({what})" for what in set_comments(run.spark, target, changes)]
    except Exception as exc:  # noqa: BLE001 - published; the comments are not worth failing it
        run.details.setdefault("finalize_pending", []).append(f"set the comments: {first_line(exc)}")
        run.log.warning(f"published, but could not set {target}'s comments: {first_line(exc)}")
