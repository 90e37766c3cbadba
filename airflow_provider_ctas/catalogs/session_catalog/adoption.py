"""Durable tries on the session catalog (``core.durable``): keep a prepared staging for the next
try, find it in that try's begin, and move its fence to that try.

The staging stays where it was written, under the name of the try that prepared it; what moves is
the try its markers name (the table's properties, the marker file): one metastore call or one file
write, checked by the publish exactly as for staging a try created itself. Adoption needs no
rename, so it works on object stores too, and no Spark job runs.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Plan, partition_directories
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.durable import RECORD_FILE, Candidate, PreparedRecord, adoptable, mismatch

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def record_path(location: str) -> str:
    return f"{location.rstrip('/')}/{RECORD_FILE}"


def keep_for_next_try(ctx: RunContext, plan: Plan, digest: str, checks_summary: str) -> str:
    """Write the record that lets the next try adopt this try's staging; returns its location."""
    location = ctx.adopted.location if ctx.adopted else str(ctx.details["staging_location"])
    record = PreparedRecord(
        txn_id=ctx.table.txn_id,
        digest=digest,
        prepared_by_try=ctx.adopted.record.prepared_by_try if ctx.adopted else ctx.table.try_number,
        held_by_try=ctx.table.try_number,
        row_count=int(ctx.details.get("row_count", -1)),
        mechanism=(plan.mechanism.value if plan.mechanism else ""),
        columns=plan.columns,
        registered=plan.registered_staging,
        prepared_at=ctx.adopted.record.prepared_at if ctx.adopted else now_iso(),
        checks=tuple(ctx.details.get("checks") or ()),
        checks_summary=checks_summary,
    )
    ctx.catalog.fs.write_text(record_path(location), record.to_json())
    return location


def find(ctx: RunContext, digest: str) -> Candidate | None:
    """The prepared staging of an earlier try of this transaction that this try may adopt."""
    table = ctx.table
    root = ctx.catalog.db_location(table.target.database)
    locations: dict[str, int] = {}
    for parsed, ref in ctx.catalog.reserved_tables(table.target.database, table.txn_id):
        info = ctx.catalog.table_info(ref)
        if parsed.role == "staging" and parsed.try_number < table.try_number and info and info.location:
            locations[info.location.rstrip("/")] = parsed.try_number
    for name in ctx.catalog.fs.list_names(root, markers.name_pattern(table.txn_id)):
        named = markers.parse_reserved_name(name)
        if named and named.role == "staging" and named.try_number < table.try_number:
            locations.setdefault(f"{root}/{name}", named.try_number)
    candidates = []
    for location, name_try in locations.items():
        record = PreparedRecord.parse(ctx.catalog.fs.read_text(record_path(location)))
        if record is not None:
            candidates.append(Candidate(location, name_try, record))
    found = adoptable(candidates, table.txn_id, table.try_number, digest)
    if candidates and found is None:
        ctx.log.info("durable: earlier tries' staging does not match this try's query and settings; not adopted")
    return found


def fits(ctx: RunContext, candidate: Candidate, plan: Plan) -> bool:
    """Whether the candidate can be published as this try's plan says; logs why not."""
    why = mismatch(
        candidate.record,
        mechanism=plan.mechanism.value if plan.mechanism else "",
        columns=plan.columns,
        registered=plan.registered_staging,
    )
    if why:
        ctx.log.info(f"durable: not adopting the staging of try {candidate.record.prepared_by_try}: {why}")
    return not why


def adopt(ctx: RunContext, candidate: Candidate, schema: StructType) -> str | None:
    """Move the fence of ``candidate`` to this try; None (nothing changed) when its markers are
    not this transaction's any more (a newer try took or dropped it meanwhile)."""
    table, record = ctx.table, candidate.record
    marker = ctx.catalog.read_marker(candidate.location)
    if marker is None or marker.txn_id != table.txn_id or marker.published_at or marker.revoked_by:
        return None
    if marker.try_number != record.held_by_try:
        return None
    if record.registered:
        ref = table.staging_table(candidate.name_try)
        properties = ctx.catalog.properties(ref)
        if properties is None or markers.marker_try(properties) != record.held_by_try:
            return None
        ctx.catalog.set_properties(ref, {markers.TRY_NUMBER: str(table.try_number)})
        ctx.details["staging_table"] = ref.qualified
    moved = dataclasses.replace(marker, try_number=table.try_number)
    ctx.catalog.fs.write_text(f"{candidate.location}/{markers.MARKER_FILE}", moved.to_json())
    ctx.catalog.fs.write_text(record_path(candidate.location), record.held_by(table.try_number).to_json())
    ctx.adopted = candidate
    ctx.staged_schema = schema
    ctx.details["staging_location"] = candidate.location
    ctx.details["adopted_from_try"] = record.prepared_by_try
    if not record.registered:
        ctx.staging_directory = candidate.location
        if table.partition_by:
            files = [path for path, _ in ctx.catalog.fs.data_files(candidate.location)]
            ctx.staged_partitions = partition_directories(candidate.location, files, list(table.partition_by))
    what = ctx.details.get("staging_table") or candidate.location
    return (
        f"{what} (adopted: try {record.prepared_by_try} wrote {record.row_count} rows at {record.prepared_at}; "
        f"its markers now name try {table.try_number})"
    )
