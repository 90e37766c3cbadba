"""begin: check the session and the catalog, decide what the target allows, and clean up earlier
tries' staging tables. For an existing target, from the second try on, an empty commit records the
previous try's version for the transaction's Delta application (fencing every earlier try); Delta
skipping that commit means the previous try's write had landed. A new target's staging table is
created here, as is one that checks will read (``DeltaPlan.staging_created_in_begin``)."""

from __future__ import annotations

from dataclasses import replace

from airflow_provider_ctas.catalogs.analysis import analyse_query, describe_schema
from airflow_provider_ctas.catalogs.delta import durable
from airflow_provider_ctas.catalogs.delta.plan import DeltaPlan, Publish
from airflow_provider_ctas.catalogs.delta.run import DeltaRun
from airflow_provider_ctas.catalogs.delta.session import check_delta_catalog
from airflow_provider_ctas.catalogs.delta.staging import create_staging, drop_staging
from airflow_provider_ctas.catalogs.delta.table import FORMAT, write_version
from airflow_provider_ctas.catalogs.existing_target import nothing_to_do
from airflow_provider_ctas.catalogs.metastore.catalog import TableInfo
from airflow_provider_ctas.core.errors import DatabaseNotFoundError, InvalidInputError, UnsupportedTargetError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport, Reached
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.comments import read_comments


def begin(run: DeltaRun, report: PhaseReport, *, checks: bool) -> DeltaPlan | None:
    """The plan, or None when there is nothing to do (the outcome says why)."""
    check_delta_catalog(run.spark)
    table, target = run.table, run.table.target
    run.details["metastore_uris"] = run.engine.metastore_uris()
    run.details["spark_application"] = run.engine.application()
    if run.catalog.database_location(target.database) is None:
        raise DatabaseNotFoundError(f"database {target.database!r} does not exist; create it first")
    # With durable=True an earlier try's staging may be taken over: it is cleaned up after that.
    adopts = bool(run.request.durable) and table.try_number > 1
    if table.try_number > 1 and not adopts:
        report.touched += drop_staging(run, up_to=table.try_number - 1)
    plan = _decide(run, report, checks)
    if adopts:
        adopted = durable.adopt(run, plan) if plan is not None else None
        if adopted is not None:
            plan, touched = adopted
            report.touched.append(touched)
        report.touched += drop_staging(run, up_to=table.try_number - 1)
    if plan is None:
        return None
    if plan.staging_created_in_begin(checks):
        run.fault("before_staging")
        report.touched.append(create_staging(run, plan))
    elif plan.adopted is None and plan.stages:
        report.touched.append(f"nothing yet: {table.staging_table()} is written in prepare")
    run.progress.reached = Reached.BEGUN
    return plan


def _decide(run: DeltaRun, report: PhaseReport, checks: bool) -> DeltaPlan | None:
    """What the target allows, or None when there is nothing to do."""
    table, target = run.table, run.table.target
    existing = run.catalog.table_info(target)
    if existing is not None and nothing_to_do(table, existing.properties, run.progress, run.details, run.log):
        report.note = f"outcome {run.progress.outcome}; nothing staged"
        return None
    schema = analyse_query(run.spark, run.request.sql, run.engine, run.log, run.details)
    missing = [c for c in table.partition_by if c not in {f.name.lower() for f in schema.fields}]
    if missing:
        raise InvalidInputError(f"partition_by names {missing}, which the query does not produce")
    table.comments.require_columns(f.name for f in schema.fields)
    describe_schema(schema, run.details)
    plan = DeltaPlan(Publish.RENAME, schema, table.comments)
    if existing is None:
        run.details["publish_mechanism"] = Publish.RENAME.value
        return plan
    columns = (f.name for f in schema.fields)
    plan = in_place(run, replace(plan, comments=table.comments.over(read_comments(run.spark, target), columns)),
                    existing, stages=checks or bool(run.request.durable))  # fmt: skip
    report.touched.append(_fence_earlier_tries(run))
    return None if run.progress.outcome is not None else plan


def in_place(run: DeltaRun, plan: DeltaPlan, existing: TableInfo, *, stages: bool) -> DeltaPlan:
    """``plan`` publishing into ``existing`` in place, if it is a target this try may write so."""
    table, target = run.table, run.table.target
    if existing.provider.lower() != FORMAT:
        raise UnsupportedTargetError(
            f"{target} is a {existing.provider or 'non-Delta'} table, not a Delta table; Delta's catalog would "
            "drop it and then create the new one (not atomic); drop it first or keep its table format"
        )
    if table.mode is Mode.OVERWRITE_PARTITIONS:
        current = [c.lower() for c in existing.partition_columns]
        if current != list(table.partition_by):
            raise UnsupportedTargetError(
                f"partition_by {list(table.partition_by)} differs from {target}'s partitioning {current}; "
                "overwrite_partitions keeps the table's partitioning"
            )
    run.details["publish_mechanism"] = Publish.IN_PLACE.value
    return replace(plan, mechanism=Publish.IN_PLACE, stages=stages, target_location=existing.location)


def _fence_earlier_tries(run: DeltaRun) -> str:
    """From the second try on (and unless the previous try is recorded as successful, a re-run),
    an empty commit that records the previous try's version for the transaction's application:
    no earlier try can commit after it. Delta skips it if that version is recorded already, which
    only the previous try's own write does: it landed, so this try has nothing to do."""
    table, target, previous = run.table, run.table.target, run.table.try_number - 1
    if previous == 0 or table.last_committed_try == previous:
        return "no earlier try to fence"
    empty = run.spark.table(target.quoted).limit(0)
    with run.user_metadata(fence=previous):
        run.fenced(lambda: run.with_app(empty.writeTo(target.quoted), write_version(previous)).append())
    if run.our_commit(target.quoted, fence=previous) is None:
        run.log.info(f"{target} was already published by try {previous} of this task instance")
        run.details["published_by_try"] = previous
        run.progress.outcome = Outcome.ALREADY_PUBLISHED
        return f"nothing: Delta skipped the fence, try {previous}'s write is recorded"
    return (
        f"{target} (tries up to {previous} fenced: Delta application {table.app_id} at version "
        f"{write_version(previous)}, an empty commit)"
    )
