"""begin: analyse the SELECT, clean up what earlier tries left, decide what the target allows and
how to publish (a :class:`Plan`), and create this try's staging table, empty, with its markers.
No Spark job runs."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.analysis import analyse_query, describe_schema
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.metastore.catalog import TableInfo, now_iso
from airflow_provider_ctas.catalogs.provenance import new_table_properties
from airflow_provider_ctas.catalogs.session_catalog import adoption, recovery
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import (
    EXTERNAL_STAGING,
    Plan,
    Publish,
    choose_mechanism,
    column_order,
    length_checks,
    on_object_store,
)
from airflow_provider_ctas.catalogs.session_catalog.publish.rename import target_appeared
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.comments import Comments
from airflow_provider_ctas.core.errors import (
    LeftoverError,
    PublishError,
    TargetExistsError,
    UnsupportedTargetError,
)
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport, Reached
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.catalog_entry import REDACTED
from airflow_provider_ctas.spark.comments import read_comments
from airflow_provider_ctas.spark.ddl import create_table_sql

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def begin(ctx: RunContext, report: PhaseReport) -> Plan:
    target = ctx.table.target
    ctx.catalog.db_location(target.database)  # DatabaseNotFoundError, before anything else
    # The metastore this driver really uses, for lineage (whatever configured it: conf, hive-site.xml).
    ctx.details["metastore_uris"] = ctx.catalog.engine.metastore_uris()
    ctx.details["spark_application"] = ctx.catalog.engine.application()
    # Earlier tries' staging is a leftover here (their directories are deleted only after this try
    # publishes or aborts: recovery.finish_cleanup). A first try has no earlier tries, and its
    # driver is never relaunched (cluster deploy mode is refused), so it skips the scan; were its
    # staging there after all, creating it fails and the next try cleans up.
    # With durable=True, an earlier try's prepared staging is set aside from that clean-up, to be
    # adopted once this try's plan says it can publish it as it is.
    candidate = None
    if ctx.table.try_number > 1:
        candidate = adoption.find(ctx, ctx.request.durable) if ctx.request.durable else None
        keep_try = candidate.name_try if candidate else None
        report.touched += recovery.clean_tries(ctx, up_to=ctx.table.try_number, delete_dirs=False, keep_try=keep_try)
    info, taken = ctx.catalog.table_info(target, storage=True), False
    if info is None:
        info, taken = _require_free_location(ctx)
    if info is not None and (skip := _decide_on_existing_target(ctx, info)) is not None:
        report.note = f"outcome {skip}; no staging created"
        if candidate is not None:
            report.touched += recovery.clean_tries(ctx, up_to=ctx.table.try_number, delete_dirs=False)
        return Plan(skip=skip)
    schema = _analyse(ctx)
    ctx.table.comments.require_columns(f.name for f in schema.fields)
    columns = tuple((f.name, f.dataType.simpleString()) for f in schema.fields)
    object_store = on_object_store(ctx.catalog.db_location(target.database))
    mechanism, problems = choose_mechanism(
        target=str(target),
        info=info,
        mode=ctx.table.mode,
        table_format=ctx.table.table_format,
        partition_by=ctx.table.partition_by,
        allow_swap=ctx.table.allow_swap,
        new=columns,
        object_store=object_store,
    )
    if mechanism in (Publish.RENAME, Publish.SWAP) and (factory := ctx.catalog.renames_by_copy()):
        what = "a new table is published" if mechanism is Publish.RENAME else "this replace would swap the table"
        raise UnsupportedTargetError(
            f"{what} by renaming, and this session's metastore is AWS Glue's Data Catalog ({factory}), whose "
            "client renames by copying the table and deleting the old one: not one step. Without a rename: "
            "replace an existing table of the same shape (a flip), or overwrite_partitions on an existing "
            "table; or use Iceberg tables on Glue (table_format='iceberg', a catalog of type=glue)"
        )
    if mechanism is Publish.SWAP and info is not None and not ctx.catalog.can_rename_in_place(info):
        raise UnsupportedTargetError(
            f"replace cannot swap {target}: it is a managed table at {info.location}, not at its default "
            "location (an earlier replace flipped it there), and only a classic Spark session can move such a "
            "table aside without losing its data; run this replace through spark-submit, or keep the table's shape"
        )
    if problems:
        ctx.log.warning(
            f"{target} will be swapped ({'; '.join(problems)}): readers may find it missing or empty "
            "for the moment between two renames (allow_swap=True)"
        )
    _write_as_target(ctx, info, mechanism)
    ctx.details["publish_mechanism"] = mechanism.value
    plan = Plan(mechanism, columns, object_store=object_store, default_location_taken=taken)
    if candidate is not None:
        if adoption.fits(ctx, candidate, plan) and (adopted := adoption.adopt(ctx, candidate, schema)):
            report.touched.append(adopted)
            ctx.progress.reached = Reached.BEGUN
            ctx.fault("after_begin")
            return replace(plan, staging_location=candidate.location)
        report.touched += recovery.clean_tries(ctx, up_to=ctx.table.try_number, delete_dirs=False)
    ctx.fault("before_staging")
    location, touched = _create_staging(ctx, plan, schema, _staging_comments(ctx, plan, schema))
    report.touched.append(touched)
    ctx.progress.reached = Reached.BEGUN
    ctx.fault("after_begin")
    return replace(plan, staging_location=location)


def _decide_on_existing_target(ctx: RunContext, info: TableInfo) -> Outcome | None:
    """None to go on; the outcome when there is nothing to do."""
    target, mode = ctx.table.target, ctx.table.mode
    if info.table_type == "VIEW":
        raise UnsupportedTargetError(f"{target} is a view; this provider only creates and replaces tables")
    if mode is Mode.OVERWRITE_PARTITIONS:
        return None  # every run (re)writes its partitions; the shape is checked once the query is analysed
    published_try = ctx.published_try(info)
    if published_try is not None:
        ctx.details["published_by_try"] = published_try
        if mode is Mode.REPLACE and published_try == ctx.table.last_committed_try:
            ctx.log.info(
                f"{target} was published by try {published_try} of this task instance, which Airflow "
                "recorded as successful: this is a re-run, replacing it"
            )
            return None
        ctx.log.info(f"{target} was already published by try {published_try} of this task instance; nothing to run")
        return _skip(ctx, Outcome.ALREADY_PUBLISHED)
    owner = ownership.describe_owner(info.properties)
    if mode is Mode.CREATE:
        raise TargetExistsError(
            f"{target} already exists, created by {owner}; mode 'create' "
            "does not touch it (use 'replace' to replace it or 'create_if_not_exists' to skip)"
        )
    if mode is Mode.CREATE_IF_NOT_EXISTS:
        ctx.log.info(f"{target} exists (created by {owner}); create_if_not_exists: nothing to do")
        return _skip(ctx, Outcome.TARGET_EXISTS)
    if not ownership.replaceable(info.table_type, info.properties):
        raise UnsupportedTargetError(
            f"{target} is an {info.table_type or 'unknown'} table with data at {info.location}; replace "
            "only replaces managed tables, whose data the metastore owns, and external tables this "
            "provider published"
        )
    return None


def _write_as_target(ctx: RunContext, info: TableInfo | None, mechanism: Publish) -> None:
    """A flip's or a partition switch's staged files become the target's: they are written as an
    ``INSERT`` into the target writes them. (A rename or a swap publishes a staging table, whose own
    insert writes its files.)"""
    if info is not None and mechanism in EXTERNAL_STAGING:
        ctx.storage_options = _storage_options(info)
        ctx.column_writes = length_checks(info.columns)


def _storage_options(info: TableInfo) -> dict[str, str]:
    """The options a flip's or a partition switch's files must be written with, as the target's
    own are: a CSV table's separator or header, say, else its readers misread the new version."""
    options = info.storage_options or {}  # begin reads the target with them
    if hidden := sorted(k for k, v in options.items() if v == REDACTED):
        raise UnsupportedTargetError(
            f"{info.ref} has storage option(s) {hidden} whose values Spark shows only redacted "
            "(spark.redaction.regex), so its new version could not be written with them; run this task "
            "through spark-submit, whose driver reads them from the catalog"
        )
    return dict(options)


def _skip(ctx: RunContext, outcome: Outcome) -> Outcome:
    ctx.progress.outcome = outcome
    return outcome


def _require_free_location(ctx: RunContext) -> tuple[TableInfo | None, bool]:
    """The target does not exist: its directory must not either, unless it is a superseded version
    of the target kept for readers (then the new table is published where it is written: the
    second value). Returns the target when it turns out to be in the middle of being created by a
    concurrent run of this provider.

    A plain CTAS that crashed leaves the target's directory behind and blocks the rename. A
    concurrent run's rename shows the same way for a moment: the metastore moves the directory
    before it commits the rename (seen in parallel backfills' first runs).
    """
    target = ctx.table.target
    location = ctx.catalog.default_location(target)
    if not ctx.catalog.fs.exists(location):
        return None, False
    marker = ctx.catalog.read_marker(location)
    if marker is not None and marker.target == target.qualified and ctx.catalog.superseded_record(location):
        ctx.log.info(
            f"{location} holds a superseded version of {target} kept for readers; the new table is "
            "published where it is written"
        )
        return None, True
    if marker is not None and marker.txn_id == ctx.table.txn_id:
        ctx.catalog.fs.delete(location)
        ctx.log.info(f"deleted {location}, left by an earlier try of this transaction")
        return None, False
    if marker is not None and marker.target == target.qualified:
        ctx.fault("concurrent_creator")
        if target_appeared(ctx):
            ctx.log.info(f"{target} was being created by a concurrent run; it exists now")
            return ctx.catalog.table_info(target, storage=True), False
        raise PublishError(
            f"{location} holds data that transaction {marker.txn_id} of this provider is publishing as "
            f"{target}, but no table is registered there yet; the next try looks again"
        )
    raise LeftoverError(
        f"{target} does not exist but its directory {location} does (left by a crashed "
        "non-atomic CREATE TABLE AS SELECT?); it has no marker of this provider, so it is left alone: "
        "remove it, then retry"
    )


def _analyse(ctx: RunContext) -> StructType:
    from pyspark.sql.types import StructType

    schema = analyse_query(ctx.spark, ctx.request.sql, ctx.catalog.engine, ctx.log, ctx.details)
    by_name = {f.name: f for f in schema.fields}
    ordered = StructType(
        [by_name[name] for name in column_order([f.name for f in schema.fields], ctx.table.partition_by)]
    )
    describe_schema(ordered, ctx.details)
    return ordered


def _staging_comments(ctx: RunContext, plan: Plan, schema: StructType) -> Comments:
    """The comments a registered staging table is created with. A swap publishes the staging
    table's entry: it takes the comments of the columns the target keeps. A flip or a partition
    switch keeps the target's entry, whose comments are set after the publish; Spark cannot change
    a partition column's (CANNOT_ALTER_PARTITION_COLUMN), so a change there is refused now."""
    comments, target = ctx.table.comments, ctx.table.target
    if plan.mechanism is Publish.SWAP:
        return comments.over(read_comments(ctx.spark, target), (f.name for f in schema.fields))
    if not comments or plan.mechanism not in (Publish.FLIP, Publish.PARTITIONS):
        return comments
    fixed = sorted(set(comments.changes_to(read_comments(ctx.spark, target)).columns) & set(ctx.table.partition_by))
    if fixed:
        raise UnsupportedTargetError(
            f"column_comments would change the comment of partition column(s) {fixed} of {target}, which Spark "
            "cannot do on an existing file-format table (it sets them when the table is created); keep their comments"
        )
    return comments


def _create_staging(ctx: RunContext, plan: Plan, schema: StructType, comments: Comments) -> tuple[str, str]:
    """This try's staging table, empty; returns its location and what to report."""
    table = ctx.table
    staging = table.staging_table()
    properties = new_table_properties(table)
    marker = markers.MarkerFile(
        table.txn_id, table.try_number, table.target.qualified, now_iso(), table.key.to_dict()
    ).to_json()
    # A managed table's location is the one Spark itself gives it: the database's, plus its name.
    location = f"{ctx.catalog.db_location(table.target.database)}/{staging.table}"
    ctx.details["staging_location"] = location
    ctx.staged_schema = schema
    mechanism = (plan.mechanism or Publish.RENAME).value
    if not plan.registered_staging:
        # The directory is the staging: it must be this try's from its first file (its driver is
        # never relaunched, so one that exists was left by something else; the next try looks).
        if ctx.catalog.fs.exists(location):
            raise PublishError(f"staging directory {location} exists already; the next try cleans it up")
        ctx.catalog.fs.write_text(f"{location}/{markers.MARKER_FILE}", marker)
        ctx.staging_directory = location
        return location, f"{location} (marked, empty, for a {mechanism})"
    directory = None
    if plan.external_staging:
        # External over a directory that carries its marker before the table exists: the
        # publish hands this directory to the target, and dropping staging must not delete it.
        directory = location
        ctx.catalog.fs.write_text(f"{directory}/{markers.MARKER_FILE}", marker)
    ctx.catalog.sql(
        create_table_sql(
            staging.quoted, schema, table.table_format, table.partition_by, properties, directory, comments
        )
    )
    if not plan.external_staging:
        ctx.catalog.fs.write_text(f"{location}/{markers.MARKER_FILE}", marker)
    ctx.details["staging_table"] = staging.qualified
    kind = "external" if plan.external_staging else "managed"
    return location, f"{staging} (created, empty, {kind}, for a {mechanism})"
