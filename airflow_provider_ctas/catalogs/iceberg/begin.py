"""begin: check the catalog, decide what the target allows, clean up earlier tries of this
transaction and stage. A new target gets an empty staging table with its markers (published by a
rename); an existing one gets this try's branch, created from ``main`` in the same metadata swap
that raises the transaction's fence to this try and drops earlier tries' branches (a replace that
changes the table's shape also gets a staging table of the new shape: ``reshape.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.analysis import analyse_query, describe_schema
from airflow_provider_ctas.catalogs.existing_target import nothing_to_do
from airflow_provider_ctas.catalogs.iceberg import durable, reshape
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.cleanup import drop_staging
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.shape import require_group_target, require_same_shape
from airflow_provider_ctas.catalogs.provenance import new_table_properties
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import DatabaseNotFoundError, InvalidInputError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.partitioning import source_columns
from airflow_provider_ctas.core.protocol import PhaseReport, Reached
from airflow_provider_ctas.spark.ddl import create_table_sql

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def begin(run: IcebergRun, report: PhaseReport, *, holds: bool) -> IcebergPlan | None:
    """The plan, or None when there is nothing to do (the outcome says why)."""
    catalog, target, try_number = run.catalog, run.table.target, run.table.try_number
    if catalog.type != "glue":  # a Glue catalog is named once Glue answered for the namespace (below)
        run.details["metastore_uris"] = catalog.uri
    run.details["spark_application"] = run.engine.application()
    if not catalog.namespace_exists(target.database):
        raise DatabaseNotFoundError(
            f"namespace {target.database!r} does not exist in catalog {target.catalog!r}; create it first"
        )
    run.details["metastore_uris"] = catalog.lineage_uri(target.database)
    if try_number > 1:
        report.touched += drop_staging(run, up_to=try_number - 1)
    existing = catalog.load(target)
    if existing is not None and nothing_to_do(
        run.table, _published_markers(run, existing), run.progress, run.details, run.log
    ):
        report.note = f"outcome {run.progress.outcome}; nothing staged"
        return None
    if holds:
        require_group_target(catalog, target, existing)
    schema = _analyse(run)
    run.table.comments.require_columns(f.name for f in schema.fields)
    if existing is None:
        catalog.check_publish_by_rename()
        run.fault("before_staging")
        plan, touched = _create_staging(run, schema)
    else:
        plan, touched = _stage_existing(run, existing, schema, holds)
    report.touched.append(touched)
    run.progress.reached = Reached.BEGUN
    return plan


def _published_markers(run: IcebergRun, existing: Any) -> Mapping[str, str]:
    """The markers of the target's last publish, or, for a retry of ``overwrite_partitions``, of
    this transaction's snapshot in ``main``'s history: other task instances publish to the same
    table, so its properties may name a later one."""
    current = existing.operations().refresh()
    props = md.properties(current)
    retried = run.table.mode is Mode.OVERWRITE_PARTITIONS and run.table.try_number > 1
    if retried and not markers.owned_by(props, run.table.txn_id):
        return md.ancestor_summary(current, run.table.txn_id) or props
    return props


def _analyse(run: IcebergRun) -> StructType:
    schema = analyse_query(run.spark, run.request.sql, run.engine, run.log, run.details)
    produced = {f.name.lower() for f in schema.fields}
    missing = [c for c in source_columns(run.table.partition_by) if c not in produced]
    if missing:
        raise InvalidInputError(f"partition_by names {missing}, which the query does not produce")
    describe_schema(schema, run.details)
    return schema


def _create_staging(run: IcebergRun, schema: StructType) -> tuple[IcebergPlan, str]:
    table = run.table
    staging = table.staging_table()
    props = new_table_properties(table)
    run.spark.sql(
        create_table_sql(staging.quoted, schema, "iceberg", table.partition_by, props, comments=table.comments)
    )
    run.details["publish_mechanism"] = Publish.RENAME.value
    return IcebergPlan(Publish.RENAME, schema), f"{staging} (created, empty)"


def _stage_existing(run: IcebergRun, existing: Any, schema: StructType, holds: bool) -> tuple[IcebergPlan, str]:
    """A replace that changes the table's shape is staged in a table of the new shape (a publish
    group's member keeps its table's shape: ``stage_branch`` refuses); any other on a branch,
    an earlier try's kept one with ``durable=True``."""
    current = existing.operations().refresh()
    if not holds and reshape.changes_shape(run.table, current, schema):
        return reshape.stage(run, existing, schema)
    adopted = durable.adopt(run, existing, schema) if run.request.durable and run.table.try_number > 1 else None
    return adopted or stage_branch(run, existing, schema, current)


def stage_branch(run: IcebergRun, existing: Any, schema: StructType, current: Any) -> tuple[IcebergPlan, str]:
    """This try's branch of ``existing``, made from ``main`` in the swap that raises the fence;
    ``current`` is ``existing``'s metadata, just read."""
    table = run.table
    target, try_number = table.target, table.try_number
    # overwrite_partitions always names partition_by, so this also checks it names the table's.
    partition_fields = require_same_shape(target.qualified, current, schema, table.partition_by)
    _, base_snapshot = run.open_branch(existing)
    run.details["publish_mechanism"] = Publish.BRANCH.value
    run.details["base_snapshot_id"] = base_snapshot
    plan = IcebergPlan(Publish.BRANCH, schema, base_snapshot, partition_fields)
    return plan, f"{target} (branch {table.branch} from snapshot {base_snapshot}; fence raised to try {try_number})"
