"""overwrite_partitions: partitions new to the target are added in one ``ALTER TABLE target ADD
PARTITION ... LOCATION ...`` (one metastore call, all or nothing); existing ones are pointed at
their new locations in one more (alter_partitions; over Spark Connect one ``SET LOCATION`` each,
as SQL has no batch form). Any failure switches back what was switched."""

from __future__ import annotations

import time
from collections.abc import Mapping

from airflow_provider_ctas.catalogs.session_catalog import retention
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Publish, partition_names, schema_drift
from airflow_provider_ctas.catalogs.session_catalog.publish.fence import (
    require_no_newer_try,
    require_own_staging,
    revoked,
    still_own_staging,
)
from airflow_provider_ctas.catalogs.session_catalog.publish.request import Publication, applied
from airflow_provider_ctas.core.errors import FencedError, PublishError
from airflow_provider_ctas.core.identifiers import TableRef, quote, sql_string_literal
from airflow_provider_ctas.spark.errors import first_line

RELEASED_DIR = "_released"
"""Inside a released managed staging table's directory: where its metadata points (see below)."""

Switched = list[tuple[tuple[str, ...], str | None]]
"""(partition values, the location it had before; None when it is new), in the order switched."""


def partition_clause(columns: list[str], values: tuple[str, ...]) -> str:
    pairs = ", ".join(f"{quote(c)} = {sql_string_literal(v)}" for c, v in zip(columns, values, strict=True))
    return f"PARTITION ({pairs})"


def publish_partitions(ctx: RunContext, pub: Publication) -> None:
    plan, target_info, staging, report = pub.plan, pub.target_info, pub.staging, pub.report
    table, target = ctx.table, ctx.table.target
    if target_info is None or target_info.table_type == "VIEW":
        raise PublishError(f"{target} disappeared since begin; the next try will create it")
    if drift := schema_drift(target_info, table.table_format, table.partition_by, plan.columns):
        raise PublishError(f"{target} changed since begin: {'; '.join(drift)}")
    columns = target_info.partition_columns
    staged_partitions = (
        ctx.catalog.partitions(staging, columns) if pub.staged_partitions is None else pub.staged_partitions
    )
    current = ctx.catalog.partitions(target, columns)
    require_no_newer_try(ctx)
    require_own_staging(ctx)  # after the reads: nothing but the switch between the check and it
    ctx.fault("publish_checked")
    switched: Switched = []
    started = time.monotonic()
    try:
        added = sorted((v, loc) for v, loc in staged_partitions.items() if v not in current)
        if added:  # one metastore call (add_partitions), all or nothing
            _add(ctx, columns, added)
            switched += [(values, None) for values, _ in added]
            ctx.fault("publish_between_partitions")
        existing = {v: loc for v, loc in staged_partitions.items() if v in current}
        if existing:

            def record(replaced: list[tuple[tuple[str, ...], str]]) -> None:
                switched.extend(replaced)
                ctx.fault("publish_between_partitions")

            ctx.catalog.engine.set_partition_locations(target, columns, existing, record)
        switched_at = time.monotonic()
        if not still_own_staging(ctx):
            raise revoked(ctx)
    except Exception as exc:
        _revert(ctx, columns, switched, staged_partitions)
        if isinstance(exc, FencedError):
            raise
        raise PublishError(
            f"switching partitions of {target} failed ({first_line(exc)}); the ones already switched were switched back"
        ) from exc
    seconds = switched_at - started  # as for a flip: the metastore calls, not the fence re-check
    ctx.progress.publish()
    names = partition_names(columns, [values for values, _ in switched])
    ctx.details["publish"] = {"mechanism": Publish.PARTITIONS.value, "seconds": round(seconds, 3), "partitions": names}
    report.touched.append(f"{target}: {len(switched)} partition(s) switched in {seconds:.3f}s ({', '.join(names)})")
    _after_switch(ctx, pub, columns, [location for _, location in switched if location])


def _after_switch(ctx: RunContext, pub: Publication, columns: list[str], superseded: list[str]) -> None:
    """What follows a switch: nothing here can undo it (``RunContext.after_publish``)."""
    target, properties = ctx.table.target, dict(ctx.table.table_properties)
    if properties:
        ctx.after_publish("user table properties", lambda: ctx.catalog.set_properties(target, properties))
    if ctx.staging_directory is None:  # staging that is only a directory has no metadata
        ctx.after_publish("drop the staging metadata", lambda: ctx.catalog.drop(pub.staging))
    ctx.after_publish(
        "remove superseded partitions",
        lambda: pub.report.touched.extend(retention.remove_superseded_partitions(ctx, columns, superseded)),
    )


def release_managed_staging(ctx: RunContext, staging: TableRef, staged: Mapping[tuple[str, ...], str]) -> str:
    """Point a managed staging table's metadata at an empty directory inside its own, so that
    dropping it (which deletes a managed table's locations) keeps the partition data a target is
    about to read. Spark refuses to turn a managed table external ('EXTERNAL' is a reserved
    property); relocating its metadata is the same in effect, and moves no data."""
    root = f"{ctx.catalog.db_location(staging.database)}/{staging.table}"
    released = f"{root}/{RELEASED_DIR}"
    # The directory must exist: the metastore logs an ERROR when a drop finds nothing to delete.
    ctx.catalog.fs.write_text(f"{released}/README", f"{staging}'s metadata points here; its data is next to this\n")
    columns = list(ctx.table.partition_by)
    moved = {values: f"{released}/p{i}" for i, values in enumerate(sorted(staged))}
    try:
        ctx.catalog.engine.set_partition_locations(staging, columns, moved)
        ctx.catalog.sql(f"ALTER TABLE {staging.quoted} SET LOCATION {sql_string_literal(released)}")
    except Exception as exc:
        require_own_staging(ctx)  # a newer try dropped it: FencedError
        raise PublishError(f"could not hand over {staging}'s partitions: {first_line(exc)}") from exc
    return f"{staging} (released: its {len(staged)} partition(s) stay in {root} when it is dropped)"


def _revert(ctx: RunContext, columns: list[str], switched: Switched, ours: Mapping[tuple[str, ...], str]) -> None:
    """Switch back each partition this try switched that still points where this try pointed it
    (``ours``, read right before the switch back: in the same listing as its one call, classic; per
    partition, Connect): one a newer try switched since (after this try's switch, before its
    re-check) keeps the newer version. The chaos soak (seed 611251585) found a zombie's switch back
    undoing a newer publish. Partitions this try added are dropped while they still point there."""
    target = ctx.table.target
    back = {values: old for values, old in switched if old is not None}
    if back:
        try:
            kept = ctx.catalog.engine.set_partition_locations(target, columns, back, only_from=ours)
        except Exception as exc:  # noqa: BLE001 - the added ones are still dropped; each failure is logged
            ctx.log.warning(f"could not switch {len(back)} partition(s) of {target} back: {first_line(exc)}")
            kept = []
        for values in kept:
            clause = partition_clause(columns, values)
            ctx.log.warning(f"{clause} of {target} was switched again since this try switched it; left as it is")
    added = [values for values, old in switched if old is None]
    if not added:
        return
    try:
        now: Mapping[tuple[str, ...], str] | None = ctx.catalog.partitions(target, columns)
    except Exception as exc:  # noqa: BLE001 - dropped all the same
        ctx.log.warning(f"could not list {target}'s partitions before dropping the ones added: {first_line(exc)}")
        now = None
    for values in reversed(added):
        clause = partition_clause(columns, values)
        if now is not None and now.get(values, "").rstrip("/") != ours.get(values, "").rstrip("/"):
            ctx.log.warning(f"{clause} of {target} was switched again since this try added it; left as it is")
            continue
        try:
            ctx.catalog.sql(f"ALTER TABLE {target.quoted} DROP IF EXISTS {clause}")
        except Exception as exc:  # noqa: BLE001 - keep dropping the others; each failure is logged
            ctx.log.warning(f"could not drop {clause} of {target}: {first_line(exc)}")


def _add(ctx: RunContext, columns: list[str], added: list[tuple[tuple[str, ...], str]]) -> None:
    target = ctx.table.target
    clauses = " ".join(
        f"{partition_clause(columns, values)} LOCATION {sql_string_literal(location)}" for values, location in added
    )
    try:
        ctx.catalog.sql(f"ALTER TABLE {target.quoted} ADD {clauses}")
    except Exception as exc:
        if not applied(ctx, f"adding {len(added)} partition(s) to {target}", exc, lambda: _added(ctx, columns, added)):
            raise


def _added(ctx: RunContext, columns: list[str], added: list[tuple[tuple[str, ...], str]]) -> bool:
    """Every partition of ``added`` is in the target, at the location this try staged it at."""
    now = ctx.catalog.partitions(ctx.table.target, columns)
    return all(now.get(values, "").rstrip("/") == location.rstrip("/") for values, location in added)
