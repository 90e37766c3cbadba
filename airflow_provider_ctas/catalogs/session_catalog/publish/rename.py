"""A new target: ``ALTER TABLE staging RENAME TO target`` (the metastore moves the managed
directory and renames the table in one call), under the claim on the target's name that keeps two
creators' renames from overlapping (``metastore/name_claim.py``).

Fencing: a newer try's begin drops an older try's staging table, so the older try's rename fails;
an older try that created its staging after that begin (it stalled inside its own) finds the newer
try's staging right before its rename and does not publish.
With ``durable=True`` the newer try may take the staging table over instead (its markers then name
the newer try): the staging is checked right before the rename, and a rename that fails because
the staging is no longer this try's is that fence, never a race lost to another writer."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext

from airflow_provider_ctas.catalogs.existing_target import appeared
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.metastore.name_claim import name_claimed
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Publish, partition_names
from airflow_provider_ctas.catalogs.session_catalog.publish.fence import (
    require_no_newer_try,
    require_own_staging,
    still_own_staging,
)
from airflow_provider_ctas.catalogs.session_catalog.publish.request import Publication, applied, renamed_in
from airflow_provider_ctas.core.errors import FencedError, LeftoverError, PublishError, TargetExistsError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.errors import error_condition, first_line


def publish_by_rename(ctx: RunContext, pub: Publication) -> None:
    staging, provenance, report = pub.staging, pub.provenance, pub.report
    target = ctx.table.target
    require_own_staging(ctx)
    partitions: list[str] = []
    started = time.monotonic()
    try:  # the staging's calls too: one that fails because the staging is gone is the fence
        ctx.catalog.set_properties(staging, provenance)  # carried over by the rename, atomically
        if ctx.table.mode is Mode.OVERWRITE_PARTITIONS:  # its first run: all the new table has
            found = ctx.catalog.partitions(staging, list(ctx.table.partition_by))
            partitions = partition_names(ctx.table.partition_by, found)
        with _name_claimed(ctx, pub):
            ctx.fault("publish_before_rename")
            require_no_newer_try(ctx)
            ctx.catalog.rename(staging, target)
    except FencedError:
        raise
    except Exception as exc:
        if applied(ctx, f"renaming {staging} to {target}", exc, lambda: renamed_in(ctx, staging)):
            _published(ctx, pub, partitions, time.monotonic() - started)
            return
        if not still_own_staging(ctx):
            raise superseded(ctx) from exc
        # A concurrent creator that wins the rename shows up as TABLE_OR_VIEW_ALREADY_EXISTS, as
        # LOCATION_ALREADY_EXISTS (its directory moved, its metastore commit not yet visible) or as
        # the metastore's own "new table ... already exists": all three are a lost race once the
        # target is there.
        if target_appeared(ctx):
            lost_race(ctx, report)
            return
        if error_condition(exc).startswith("LOCATION_ALREADY_EXISTS"):
            location = f"{ctx.catalog.db_location(target.database)}/{target.table}"
            if ctx.catalog.read_marker(location) is None:
                raise LeftoverError(
                    f"{target}'s directory appeared while this task ran and blocks the publish: {first_line(exc)}"
                ) from exc
        raise PublishError(f"could not rename {staging} to {target}: {first_line(exc)}") from exc
    _published(ctx, pub, partitions, time.monotonic() - started)


def _name_claimed(ctx: RunContext, pub: Publication) -> AbstractContextManager[None]:
    """The metastore moves a managed staging table's directory: renames into one name must not
    overlap (``name_claim``). An external one's rename is metadata only."""
    if pub.plan.external_staging:
        return nullcontext()
    return name_claimed(ctx.catalog, ctx.table.target, try_markers(ctx.table), ctx.log)


def _published(ctx: RunContext, pub: Publication, partitions: list[str], seconds: float) -> None:
    staging, target = pub.staging, ctx.table.target
    ctx.progress.publish()
    # External staging (object stores): the rename is metadata only and the table stays external.
    external = pub.plan.external_staging
    ctx.details["publish"] = {"mechanism": Publish.RENAME.value, "seconds": round(seconds, 3), "external": external}
    if partitions:
        ctx.details["publish"]["partitions"] = partitions
    kind = "external, no data moved" if external else "managed"
    pub.report.touched.append(f"{staging} -> {target} (renamed in {seconds:.3f}s, {kind})")


def superseded(ctx: RunContext) -> FencedError:
    return FencedError(
        f"the staging of try {ctx.table.try_number} ({ctx.staging_table}) was dropped or taken over by a newer "
        "try of this task instance while this one waited to publish; this try published nothing"
    )


def target_appeared(ctx: RunContext) -> bool:
    """Whether the target exists, waiting briefly for a concurrent rename's metastore commit."""
    return appeared(lambda: ctx.catalog.table_info(ctx.table.target)) is not None


class TargetCreatedMeanwhile(Exception):
    """overwrite_partitions lost the first-use race to another task instance (a backfill's first
    dates): its staging is kept, and the executor switches its partitions into the new table."""


def lost_race(ctx: RunContext, report: PhaseReport) -> None:
    """The target appeared between begin and publish: somebody else won."""
    target, staging = ctx.table.target, ctx.staging_table
    info = ctx.catalog.table_info(target)
    published_try = ctx.published_try(info) if info is not None else None
    if ctx.table.mode is Mode.OVERWRITE_PARTITIONS and info is not None and published_try is None:
        raise TargetCreatedMeanwhile(f"{target} was created by a concurrent run while this one was creating it")
    if published_try is not None and published_try > ctx.table.try_number:
        raise superseded(ctx)
    ctx.catalog.drop(staging)
    report.touched.append(f"{staging} (dropped: target already exists)")
    if published_try is not None:
        ctx.progress.publish(Outcome.ALREADY_PUBLISHED)
        ctx.details["published_by_try"] = published_try
        return
    if ctx.table.mode is Mode.CREATE_IF_NOT_EXISTS:
        ctx.progress.publish(Outcome.TARGET_EXISTS)
        return
    owner = ownership.describe_owner(info.properties) if info else "another writer"
    raise TargetExistsError(f"{target} was created by {owner} while this task ran; that table is left untouched")
