"""Superseded versions: kept on storage for readers that listed their files before the switch, then
deleted by the next publish (or GC) once their retention is over.

Only a directory this provider created (marker file) and retired (superseded record) is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.core import markers


def remove_superseded(ctx: RunContext, old_location: str, new_location: str, *, beside: bool = False) -> list[str]:
    """After a flip: retire the table's previous directory, and delete what its publish had kept.
    ``beside``: the superseded record is written on a thread of its own (``RunContext.settle`` waits
    for it), beside the new version's marker update: over Spark Connect each write is a Spark job."""
    if not old_location or old_location.rstrip("/") == new_location.rstrip("/"):
        return []
    marker = ctx.catalog.read_marker(old_location)
    if marker is None:
        ctx.details.setdefault("superseded_kept", []).append(old_location)
        ctx.log.warning(
            f"the previous version's data at {old_location} was not created by this provider, so it is "
            "left in place; no table points at it any more, delete it once no reader needs it"
        )
        return []
    return [*_sweep(ctx, marker, depth=0), _retire(ctx, old_location, beside)]


def remove_superseded_partitions(ctx: RunContext, columns: Sequence[str], old_locations: Sequence[str]) -> list[str]:
    """After switching partitions: retire the old partition directories this provider wrote (their
    data root has our marker file). Each root's marker is read once: the partitions one run wrote
    share it (read per partition, 1,000 partitions cost 18 s of marker reads on local disk)."""
    touched: list[str] = []
    swept: set[str] = set()
    owners: dict[str, markers.MarkerFile | None] = {}
    for old_location in old_locations:
        root = old_location.rstrip("/").rsplit("/", len(columns))[0]
        if root not in owners:
            owners[root] = ctx.catalog.read_marker(root)
        marker = owners[root]
        if marker is None:
            ctx.details.setdefault("superseded_kept", []).append(old_location)
            continue
        if root not in swept:
            swept.add(root)
            touched += _sweep(ctx, marker, depth=len(columns))
        touched.append(_retire(ctx, old_location))
        touched += delete_if_empty(ctx, root)
    return touched


def _retire(ctx: RunContext, path: str, beside: bool = False) -> str:
    """Keep a version that was just superseded for the retention, or delete it at once when the
    retention is 0."""
    seconds = ctx.table.superseded_retention_seconds
    if seconds <= 0:
        ctx.catalog.fs.delete(path)
        return f"{path} (superseded version deleted)"
    now = datetime.now(UTC)
    record = markers.SupersededRecord(
        target=ctx.table.target.qualified,
        superseded_at=now.isoformat(),
        delete_after=(now + timedelta(seconds=seconds)).isoformat(),
        superseded_by=markers.superseded_by_value(ctx.table.txn_id, ctx.table.try_number),
    )
    ctx.retained[path] = markers.Retained(path, record.delete_after)

    def write() -> None:
        ctx.catalog.fs.write_text(f"{path.rstrip('/')}/{markers.SUPERSEDED_FILE}", record.to_json())

    if beside:
        ctx.after_publish_meanwhile(f"record {path} superseded", write)
    else:
        write()
    return f"{path} (superseded version kept for readers until {record.delete_after})"


def _sweep(ctx: RunContext, marker: markers.MarkerFile, depth: int) -> list[str]:
    """Delete what a superseded version's own publish kept for readers once its time is up; what is
    still within its time is handed on to this publish's marker, so the next one finds it.
    ``marker`` is the superseded version's, read once: it also said the version is this provider's."""
    touched: list[str] = []
    now = datetime.now(UTC)
    for entry in marker.retained:
        due = markers.parse_time(entry.delete_after)
        if due is None or due > now:  # an unreadable time is kept, never taken as passed
            ctx.retained.setdefault(entry.path, entry)
            continue
        if markers.SupersededRecord.parse(ctx.catalog.fs.read_text(f"{entry.path}/{markers.SUPERSEDED_FILE}")):
            ctx.catalog.fs.delete(entry.path)
            touched.append(f"{entry.path} (superseded version deleted: its retention ended)")
            touched += delete_if_empty(ctx, entry.path.rstrip("/").rsplit("/", depth)[0] if depth else "")
    return touched


def delete_if_empty(ctx: RunContext, root: str) -> list[str]:
    """A run's data root whose partitions were all superseded and deleted holds only its marker."""
    if not root or not markers.parse_reserved_name(root.rsplit("/", 1)[-1]):
        return []
    # Dot files are checksums and the temporary file of a marker write that was killed.
    leftover = {name for name in ctx.catalog.fs.list_names(root) if not name.startswith(".")} - {markers.MARKER_FILE}
    if leftover:
        return []
    ctx.catalog.fs.delete(root)
    return [f"{root} (data root of an earlier run, now empty, deleted)"]
