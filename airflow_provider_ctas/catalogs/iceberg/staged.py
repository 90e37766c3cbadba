"""Where a try's version lives until it is published (the staging table, or this try's branch of
the target): writing it, finding the snapshot the write made, and reading it back for checks."""

from __future__ import annotations

from airflow_provider_ctas.catalogs.audit import AuditTarget
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish, Staged
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.catalogs.write_observation import WriteObservation
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.identifiers import quote
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.partitioning import parse_field

SNAPSHOT_PROPERTY = "snapshot-property."


def staged_name(run: IcebergRun, plan: IcebergPlan) -> str:
    """Where this try's version is written: the staging table, or this try's branch of the target."""
    if plan.in_staging_table:
        return run.table.staging_table().quoted
    return f"{run.table.target.quoted}.{quote('branch_' + run.table.branch)}"


def write(run: IcebergRun, plan: IcebergPlan, what: str, observation: WriteObservation) -> tuple[Staged, str]:
    """Writes the query where this try stages, guarded and observed for the checks the write
    measures; the snapshot summary carries the provenance."""
    from pyspark.sql.functions import lit

    into = staged_name(run, plan)
    markers = {SNAPSHOT_PROPERTY + k: v for k, v in try_markers(run.table).items()}

    def write_into() -> None:
        frame = observation.for_checks(
            run.spark.sql(as_subquery(run.request.sql or "")), lambda: run.spark.table(into).schema
        )
        writer = frame.writeTo(into).options(**markers)
        with run.engine.progress(what, run.log):
            if plan.in_staging_table:
                writer.append()
            elif run.table.mode is Mode.OVERWRITE_PARTITIONS:
                writer.overwritePartitions()
            else:
                writer.overwrite(lit(True))
        observation.collect(run.log)

    # A write that fails commits no snapshot: nothing of it is left to read.
    observation.write(write_into, run.log, rewritable=lambda: True)
    staged = _written_snapshot(run, plan)
    run.details["row_count"] = staged.row_count
    run.details["snapshot_id"] = staged.snapshot_id
    return staged, f"{into} (snapshot {staged.snapshot_id}, {staged.row_count} rows written)"


def _written_snapshot(run: IcebergRun, plan: IcebergPlan) -> Staged:
    in_staging = plan.in_staging_table
    meta = run.catalog.current(run.table.staging_table() if in_staging else run.table.target)
    snapshot_id = None
    if meta is not None:
        snapshot_id = md.main_snapshot(meta) if in_staging else md.refs(meta).get(run.table.branch)
    if meta is None or snapshot_id is None:
        raise FencedError("this try's staged snapshot is gone: a newer try of this task instance took over")
    if not in_staging and snapshot_id == plan.base_snapshot:  # a partition overwrite of no rows commits nothing
        return Staged(snapshot_id, 0)
    return Staged(snapshot_id, int(md.summary(meta, snapshot_id).get("added-records", "0")))


def audit_target(run: IcebergRun, plan: IcebergPlan, staged: Staged | None) -> AuditTarget:
    """What checks read: the staged version, and the published one it would replace."""
    into, columns = staged_name(run, plan), plan.columns
    if plan.mechanism is Publish.RENAME:
        return AuditTarget(staged=into, published=None, columns=columns)
    target = run.table.target.quoted  # main: the current version
    if plan.mechanism is Publish.RESHAPE:
        return AuditTarget(staged=into, published=target, columns=columns)
    if run.table.mode is not Mode.OVERWRITE_PARTITIONS:
        return AuditTarget(staged=into, published=target, columns=columns)

    def value(entry: str, alias: str) -> str:
        return partition_value(run, entry, alias)

    # What this try wrote: the branch's rows in the partitions its snapshot added files to
    # (nothing before prepare, or when the query produced no rows).
    same = " AND ".join(
        f"{value(entry, 'w')} <=> e.data_file.partition.{quote(plan.partition_fields[entry])}"
        for entry in run.table.partition_by
    )
    snapshot = staged.snapshot_id if staged is not None else None
    query = (
        f"(SELECT * FROM {target} VERSION AS OF {snapshot} AS w WHERE EXISTS (SELECT 1 FROM "
        f"{target}.entries VERSION AS OF {snapshot} AS e WHERE e.status = 1 AND e.snapshot_id = {snapshot} "
        f"AND {same}))"
        if snapshot is not None and snapshot != plan.base_snapshot
        else f"(SELECT * FROM {target} WHERE false)"
    )
    return AuditTarget(
        staged=query, published=target, columns=columns, replaced_partitions_of=run.table.partition_by,
        partition_value=value,
    )  # fmt: skip


def partition_value(run: IcebergRun, entry: str, alias: str) -> str:
    """A row's value under a partition field, computed by the catalog's own transform functions
    (``<catalog>.system.days(...)``), which give what the partition struct holds."""
    field = parse_field(entry)
    column = f"{alias}.{quote(field.column)}"
    if field.transform == "identity":
        return column
    function = f"{quote(run.table.target.catalog)}.system.{field.transform}"
    return f"{function}({column})" if field.width is None else f"{function}({field.width}, {column})"
