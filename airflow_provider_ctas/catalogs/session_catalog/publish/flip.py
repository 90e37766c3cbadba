"""Replace with the same shape: ``ALTER TABLE target SET LOCATION <staging dir>``, with the
provenance properties in the same metastore call where the driver has the catalog at hand.

Staging is a marked directory (no table: its marker fences it); the old directory is never moved
while readers may use it, and is retired afterwards only if this provider created it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.provenance import new_table_properties
from airflow_provider_ctas.catalogs.session_catalog import retention
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Publish, shape_differences
from airflow_provider_ctas.catalogs.session_catalog.publish.fence import (
    require_no_newer_try,
    require_own_staging,
    revoked,
    still_own_staging,
)
from airflow_provider_ctas.catalogs.session_catalog.publish.request import Publication
from airflow_provider_ctas.core.errors import PublishError
from airflow_provider_ctas.core.identifiers import sql_string_literal
from airflow_provider_ctas.spark.errors import first_line


def publish_by_flip(ctx: RunContext, pub: Publication) -> None:
    plan, target_info, staging, provenance, report = pub.plan, pub.target_info, pub.staging, pub.provenance, pub.report
    table, target = ctx.table, ctx.table.target
    if target_info is None:
        raise PublishError(f"{target} disappeared since begin; the next try will create it")
    problems = shape_differences(target_info, table.table_format, table.partition_by, plan.columns)
    if problems or not ownership.replaceable(target_info.table_type, target_info.properties):
        raise PublishError(f"{target} changed since begin ({'; '.join(problems) or target_info.table_type})")
    old_location, new_location = target_info.location or "", plan.staging_location or ""
    properties = {**new_table_properties(table), **provenance}
    require_no_newer_try(ctx)
    require_own_staging(ctx)  # after the reads: nothing but the flip between the check and it
    ctx.fault("publish_checked")
    started = time.monotonic()
    undo = ctx.catalog.relocate(target, new_location, properties)
    stamped = undo is not None
    if undo is None:  # Spark Connect, or a provider with its own catalog: location now, provenance after
        undo = _set_location(ctx, new_location)
    flipped = time.monotonic()
    ctx.fault("after_location_change")
    try:
        ours = still_own_staging(ctx)
    except Exception as exc:  # e.g. storage unavailable: unconfirmed is not ours; this try fails unpublished
        _undo_unless_flipped_again(ctx, undo, new_location)
        raise PublishError(f"could not re-check {new_location} after the flip ({first_line(exc)}); undone") from exc
    if not ours:
        _undo_unless_flipped_again(ctx, undo, new_location)
        raise revoked(ctx)
    ctx.progress.publish()
    ctx.details["publish"] = {
        "mechanism": Publish.FLIP.value,
        "seconds": round(flipped - started, 3),
        "previous_location": old_location,
        "location": new_location,
    }
    report.touched.append(f"{target} location {old_location} -> {new_location} ({flipped - started:.3f}s)")
    if not stamped:
        ctx.after_publish_meanwhile("record provenance", lambda: _stamp_if_still_ours(ctx, new_location, properties))
    if plan.registered_staging:
        ctx.after_publish("drop the staging metadata", lambda: ctx.catalog.drop(staging))
    ctx.after_publish(
        "remove the superseded version",
        lambda: report.touched.extend(retention.remove_superseded(ctx, old_location, new_location, beside=True)),
    )


def _undo_unless_flipped_again(ctx: RunContext, undo: Callable[[], None], location: str) -> None:
    """Undo this try's flip unless a newer try has flipped the table again since (after this try's
    flip, before its re-check): its version stands (the chaos soak found the partition switch's
    undo putting an older version back over a newer try's; seed 611251585). Unreadable, undone."""
    try:
        current = ctx.catalog.location(ctx.table.target)
    except Exception as exc:  # noqa: BLE001 - the undo is tried all the same
        ctx.log.warning(f"could not read {ctx.table.target} before undoing the flip: {first_line(exc)}")
        current = None
    if current is not None and current.rstrip("/") != location.rstrip("/"):
        ctx.log.warning(f"{ctx.table.target} was flipped again since this try flipped it; left as it is")
        return
    undo()


def _set_location(ctx: RunContext, location: str) -> Callable[[], None]:
    """``SET LOCATION`` by statement; returns the statement that restores the location read in the
    statement right before it (as ``relocate`` restores what it read in the call before its own), so
    a newer try's flip made while this driver stalled after its check stands if this one is undone."""
    target = ctx.table.target
    previous = ctx.catalog.location(target)
    if not previous:
        raise PublishError(f"{target} disappeared since begin; the next try will create it")
    ctx.catalog.sql(f"ALTER TABLE {target.quoted} SET LOCATION {sql_string_literal(location)}")

    def undo() -> None:
        ctx.catalog.sql(f"ALTER TABLE {target.quoted} SET LOCATION {sql_string_literal(previous)}")

    return undo


def _stamp_if_still_ours(ctx: RunContext, location: str, properties: dict[str, str]) -> None:
    """Copy provenance to the target unless a concurrent replace has flipped it since."""
    current = ctx.catalog.location(ctx.table.target)
    if current is None or current.rstrip("/") != location.rstrip("/"):
        ctx.log.warning(f"{ctx.table.target} was replaced again meanwhile; not stamping its properties")
        return
    ctx.catalog.set_properties(ctx.table.target, properties)
