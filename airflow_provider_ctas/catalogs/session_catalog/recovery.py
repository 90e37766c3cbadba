"""What earlier tries of a transaction left behind, found by reserved name and removed by marker.

Used by begin (before staging anything), after a publish (older tries' directories), by abort and
by the driver itself when a phase fails before publishing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.metastore.catalog import TableInfo
from airflow_provider_ctas.catalogs.metastore.name_claim import name_claimed
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.catalogs.session_catalog import retention
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import PublishError
from airflow_provider_ctas.core.identifiers import TableRef, sql_string_literal
from airflow_provider_ctas.spark.errors import first_line


def clean_tries(ctx: RunContext, up_to: int, *, delete_dirs: bool = True, keep_try: int | None = None) -> list[str]:
    """Remove staging of tries <= ``up_to`` and restore a target a crashed swap moved aside;
    ``keep_try``: the try whose prepared staging (table and directory) this try is about to adopt.

    Managed staging goes with its directory at once: the rename that would publish it needs the
    table, so a dropped one can never be published. An external (flip) staging directory could
    still be flipped in by a paused older try, so with ``delete_dirs=False`` only its metadata
    goes, and the directory waits until this try has published or aborted.
    """
    if up_to < 1:
        return []  # no try that could have left anything
    touched: list[str] = []
    target, txn_id = ctx.table.target, ctx.table.txn_id
    found = [
        (parsed, ref)
        for parsed, ref in ctx.catalog.reserved_tables(target.database, txn_id)
        if parsed.try_number <= up_to and not (parsed.role == "staging" and parsed.try_number == keep_try)
    ]
    # Backups first: a target moved aside must be back before its staging goes.
    for parsed, ref in sorted(found, key=lambda item: (item[0].role != "backup", item[0].try_number)):
        info = ctx.catalog.table_info(ref)
        if info is None:
            continue
        if parsed.role == "backup":
            touched += settle_backup(ctx, ref, info, parsed.try_number)
        elif ownership.holds_staging(info.properties, txn_id, parsed.try_number, up_to):
            ctx.catalog.drop(ref)
            what = "metadata" if info.table_type == "EXTERNAL" else "table and data"
            touched.append(f"{ref} (staging of try {parsed.try_number} dropped: {what})")
        else:
            ctx.log.warning(f"{ref} has a reserved name but not this transaction's markers; left alone")
    clean = _clean_orphan_directories if delete_dirs else _revoke_directories
    touched += clean(ctx, up_to, keep_try)
    return touched


def _revoke_directories(ctx: RunContext, up_to: int, keep_try: int | None) -> list[str]:
    """Fence earlier tries whose staging is only a directory (a flip's): their marker is marked
    revoked, which they re-read before and after their flip. It is not deleted: the marker is what
    lets this try (once it published or aborted) and GC delete the directory."""
    touched = []
    for path, _ in _unread_directories(ctx, up_to, keep_try):
        marker = ctx.catalog.read_marker(path)
        if marker is None or marker.txn_id != ctx.table.txn_id or marker.published_at or marker.revoked_by:
            continue
        if marker.try_number > up_to:
            continue  # adopted by a newer try, which holds it now
        revoked = dataclasses.replace(marker, revoked_by=ctx.table.try_number)
        ctx.catalog.fs.write_text(f"{path}/{markers.MARKER_FILE}", revoked.to_json())
        touched.append(f"{path} (staging of try {marker.try_number} revoked)")
    return touched


def settle_backup(ctx: RunContext, backup: TableRef, info: TableInfo | None, try_number: int) -> list[str]:
    """A swap's backup: restore it when the target is missing, drop it once the new version stands."""
    expected = markers.superseded_by_value(ctx.table.txn_id, try_number)
    if info is None or info.properties.get(markers.SUPERSEDED_BY) != expected:
        ctx.log.warning(f"{backup} has a reserved name but was not moved aside by this transaction")
        return []
    target = ctx.table.target
    current = ctx.catalog.table_info(target)
    if current is None:
        restore(ctx, info, target)
        return [f"{backup} -> {target} (restored the version an interrupted replace had moved aside)"]
    if ctx.published_try(current) is None:
        ctx.log.warning(
            f"{backup} holds the version of {target} that this transaction moved aside, but {target} now "
            "belongs to someone else; keeping it"
        )
        return []
    if not ownership.created_by_provider(info.properties):
        ctx.details.setdefault("superseded_kept", []).append(backup.qualified)
        ctx.log.warning(
            f"the previous version of {target} was not created by this provider; it is kept as {backup}: "
            "drop it once no reader needs it"
        )
        return []
    columns = info.partition_columns
    elsewhere = _partitions_elsewhere(ctx, backup, info)
    if info.table_type == "MANAGED" and ctx.catalog.engine.make_external(backup):
        # Its data then outlives the drop: kept for readers that listed it before the swap.
        info = dataclasses.replace(info, table_type="EXTERNAL")
    ctx.catalog.drop(backup)
    if info.table_type == "EXTERNAL":
        # An external table's data outlives DROP TABLE: retire it as a flip retires its old directory.
        touched = [f"{backup} (previous version's table dropped)"]
        touched += retention.remove_superseded(ctx, info.location or "", "")
        return touched + (retention.remove_superseded_partitions(ctx, columns, elsewhere) if elsewhere else [])
    # The metastore deleted a managed table's partitions (Spark Connect cannot make it external),
    # also those an earlier run switched in from its own data root, which is left holding its marker.
    touched = [f"{backup} (previous version dropped)"]
    for root in sorted({location.rsplit("/", len(columns))[0] for location in elsewhere}):
        touched += retention.delete_if_empty(ctx, root)
    return touched


def _partitions_elsewhere(ctx: RunContext, table: TableRef, info: TableInfo) -> list[str]:
    """Locations of ``table``'s partitions outside its own directory (switched in by earlier runs)."""
    if not info.partition_columns:
        return []
    own = (info.location or "").rstrip("/") + "/"
    locations = ctx.catalog.partitions(table, list(info.partition_columns)).values()
    return [loc.rstrip("/") for loc in locations if not loc.startswith(own)]


def restore(ctx: RunContext, backup: TableInfo | None, target: TableRef) -> None:
    if backup is None:
        raise PublishError(f"the previous version of {target} is not where this transaction moved it")
    with name_claimed(ctx.catalog, target, try_markers(ctx.table), ctx.log):  # may move its directory back
        ctx.catalog.rename_in_place(backup, target)
    unset_superseded(ctx, target)
    ctx.log.info(f"restored the previous version: {backup.ref} -> {target}")


def unset_superseded(ctx: RunContext, ref: TableRef) -> None:
    try:
        keys = ", ".join(map(sql_string_literal, markers.SUPERSEDED_KEYS))
        ctx.catalog.sql(f"ALTER TABLE {ref.quoted} UNSET TBLPROPERTIES IF EXISTS ({keys})")
    except Exception as exc:  # noqa: BLE001 - the marker only delays GC of a restored table; never fail a restore for it
        ctx.log.warning(f"could not remove {markers.SUPERSEDED_BY} from {ref}: {first_line(exc)}")


def _unread_directories(ctx: RunContext, up_to: int, keep_try: int | None = None) -> Iterator[tuple[str, str]]:
    """(path, name) of this transaction's reserved directories of tries <= ``up_to`` that the
    target does not read from (a flip, or partitions switched in, makes one live)."""
    target, txn_id = ctx.table.target, ctx.table.txn_id
    location = ctx.catalog.db_location(target.database)
    live = ctx.catalog.live_locations(target)
    for name in ctx.catalog.fs.list_names(location, markers.name_pattern(txn_id)):
        parsed = markers.parse_reserved_name(name)
        kept = parsed is not None and parsed.role == "staging" and parsed.try_number == keep_try
        if parsed and parsed.tag == markers.txn_tag(txn_id) and parsed.try_number <= up_to and not kept:
            path = f"{location}/{name}"
            if not ownership.feeds(path, live):
                yield path, name


def _clean_orphan_directories(ctx: RunContext, up_to: int, keep_try: int | None) -> list[str]:
    touched = []
    target, txn_id = ctx.table.target, ctx.table.txn_id
    for path, name in _unread_directories(ctx, up_to, keep_try):
        if ctx.spark.catalog.tableExists(target.with_table(name).quoted):
            continue  # still registered (handled above, or not ours)
        marker = ctx.catalog.read_marker(path)
        if marker is not None and marker.try_number > up_to:
            continue  # adopted by a newer try, which holds it now
        if ctx.catalog.superseded_record(path) is not None:
            continue  # a version this transaction published, superseded since: kept for the retention
        if marker is not None and marker.txn_id == txn_id and marker.published_at:
            # Published, then replaced by this try's re-run: readers that listed it before the flip
            # still read it, so it is retired for the retention, not deleted.
            touched += retention.remove_superseded(ctx, path, "")
            continue
        created_here = path == ctx.details.get("staging_location", "").rstrip("/")
        if (marker is not None and marker.txn_id == txn_id) or created_here or not ctx.catalog.fs.has_files(path):
            ctx.catalog.fs.delete(path)
            touched.append(f"{path} (orphan staging directory deleted)")
        else:
            ctx.log.warning(f"{path} looks like staging but carries no marker of this transaction; left alone")
    return touched


def finish_cleanup(ctx: RunContext) -> list[str]:
    """After a publish, whatever older tries left (directories deferred by begin) can go."""
    touched: list[str] = []
    ctx.after_publish(
        "remove older tries' staging",
        lambda: touched.extend(clean_tries(ctx, up_to=ctx.table.try_number - 1, delete_dirs=True)),
    )
    return touched
