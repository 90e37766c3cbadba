"""Replace with a new shape, only with ``allow_swap``: target -> backup, staging -> target.

Neither rename moves data into a name's default location, which may hold a superseded version kept
for readers: staging is an external table over its marked directory (the plan says so for every
swap), and the target keeps its directory when moved aside and when put back
(``CatalogClient.rename_in_place``).

Between the two renames readers can find the table missing or, for a lookup that raced the first
rename, empty: the documented window. A crash in it is repaired by the next try or GC (the backup
carries the markers that say where it belongs).
"""

from __future__ import annotations

import time

from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Publish
from airflow_provider_ctas.catalogs.session_catalog.publish.fence import require_no_newer_try, require_own_staging
from airflow_provider_ctas.catalogs.session_catalog.publish.rename import publish_by_rename
from airflow_provider_ctas.catalogs.session_catalog.publish.request import Publication, applied, renamed_in
from airflow_provider_ctas.catalogs.session_catalog.recovery import restore, settle_backup, unset_superseded
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import PublishError, UnsupportedTargetError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.errors import first_line


def publish_by_swap(ctx: RunContext, pub: Publication) -> None:
    target_info, staging, provenance, report = pub.target_info, pub.staging, pub.provenance, pub.report
    if target_info is None:  # gone since begin: nothing to swap with
        publish_by_rename(ctx, pub)
        return
    table = ctx.table
    target, backup = table.target, table.backup_table()
    if not ownership.replaceable(target_info.table_type, target_info.properties):
        raise UnsupportedTargetError(f"{target} became a {target_info.table_type} table; not replacing it")
    require_no_newer_try(ctx)
    require_own_staging(ctx)
    ctx.catalog.set_properties(staging, provenance)
    ctx.catalog.set_properties(
        target,
        {
            markers.SUPERSEDED_BY: markers.superseded_by_value(table.txn_id, table.try_number),
            markers.SUPERSEDED_TARGET: target.qualified,
            markers.SUPERSEDED_AT: now_iso(),
        },
    )
    started = time.monotonic()
    try:
        ctx.fault("publish_before_move_aside")
        ctx.catalog.rename_in_place(target_info, backup)
    except Exception as exc:
        if not applied(ctx, f"moving {target} aside", exc, lambda: _moved_aside(ctx, backup)):
            unset_superseded(ctx, target)
            raise PublishError(f"could not move {target} aside: {first_line(exc)}; it is unchanged") from exc
    gap_started = time.monotonic()
    try:
        ctx.fault("publish_after_move_aside")
        ctx.catalog.rename(staging, target)
    except Exception as exc:
        if not applied(ctx, f"renaming {staging} to {target}", exc, lambda: renamed_in(ctx, staging)):
            restore(ctx, ctx.catalog.table_info(backup), target)
            raise PublishError(
                f"could not rename {staging} to {target}: {first_line(exc)}; the previous version was restored"
            ) from exc
    finished = time.monotonic()
    ctx.progress.publish()
    ctx.details["publish"] = {
        "mechanism": Publish.SWAP.value,
        "seconds": round(finished - started, 3),
        "unavailable_seconds": round(finished - gap_started, 3),
    }
    report.touched.append(
        f"{target} -> {backup}, {staging} -> {target} (target missing for {finished - gap_started:.3f}s)"
    )
    report.touched += settle_backup(ctx, backup, ctx.catalog.table_info(backup), table.try_number)


def _moved_aside(ctx: RunContext, backup: TableRef) -> bool:
    """The target is gone and ``backup`` is this try's: the move aside happened."""
    info = ctx.catalog.table_info(backup)
    expected = markers.superseded_by_value(ctx.table.txn_id, ctx.table.try_number)
    moved = info is not None and info.properties.get(markers.SUPERSEDED_BY) == expected
    return moved and ctx.catalog.table_info(ctx.table.target) is None
