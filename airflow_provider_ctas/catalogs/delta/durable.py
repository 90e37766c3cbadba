"""Durable tries for Delta (``core.durable``): a prepared staging table is kept with its record,
and the next try takes it over instead of running the query.

The record is the file ``core.durable`` names, in the staging table's directory, where the session
catalog's GC reads it too (Delta reads only its log and the files it lists). The take-over moves
the try the staging table's markers name to the adopter (one Delta commit of the table's
properties); the publish then checks those markers exactly as for staging the try wrote itself,
and an in-place publish stays fenced by the transaction's Delta application version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from airflow_provider_ctas.catalogs.audit import results_to_details
from airflow_provider_ctas.catalogs.delta.plan import DeltaPlan
from airflow_provider_ctas.catalogs.delta.run import DeltaRun
from airflow_provider_ctas.catalogs.delta.staging import staging_of
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.checks import CheckResult, summary
from airflow_provider_ctas.core.durable import RECORD_FILE, Candidate, PreparedRecord, adoptable, mismatch
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.errors import first_line


def _columns(plan: DeltaPlan) -> tuple[tuple[str, str], ...]:
    return tuple((str(f.name), str(f.dataType.simpleString())) for f in plan.schema.fields)


def _record_path(location: str) -> str:
    return f"{location.rstrip('/')}/{RECORD_FILE}"


def keep(run: DeltaRun, plan: DeltaPlan, digest: str, checks: Sequence[CheckResult], row_count: int) -> str:
    """Writes the record that lets the next try adopt this try's staging table; returns where."""
    staging = staging_of(run, plan)
    location = run.managed_location(staging)
    record = plan.adopted.record.held_by(run.table.try_number) if plan.adopted else PreparedRecord(
        txn_id=run.table.txn_id, digest=digest, prepared_by_try=run.table.try_number,
        held_by_try=run.table.try_number, row_count=row_count, mechanism=plan.mechanism.value,
        columns=_columns(plan), registered=True, prepared_at=now_iso(),
        checks=tuple(results_to_details(checks)), checks_summary=summary(checks) if checks else "",
    )  # fmt: skip
    run.catalog.fs.write_text(_record_path(location), record.to_json())
    return _record_path(location)


def remove_record(run: DeltaRun, table: TableRef) -> None:
    """After a rename publish: the record moved with the staging table's directory into the
    published table's, where nothing needs it. The publish stands whatever happens here."""
    info = run.catalog.table_info(table)
    try:
        if info is not None and info.location and run.catalog.fs.exists(_record_path(info.location)):
            run.catalog.fs.delete(_record_path(info.location))
    except Exception as exc:  # noqa: BLE001 - published; a stray record file is all that is left
        run.details.setdefault("finalize_pending", []).append(f"remove the prepared record: {first_line(exc)}")
        run.log.warning(f"published, but could not remove the prepared record: {first_line(exc)}")


def adopt(run: DeltaRun, plan: DeltaPlan) -> tuple[DeltaPlan, str] | None:
    """Takes over the prepared staging table of an earlier try of this transaction whose record
    fits this try's plan; None when there is none (this try runs its query)."""
    table, fs = run.table, run.catalog.fs
    candidates = []
    for name_try in range(1, table.try_number):
        staging = table.staging_table(name_try)
        if run.catalog.properties(staging) is None:
            continue
        record = PreparedRecord.parse(fs.read_text(_record_path(run.managed_location(staging))))
        if record is not None:
            candidates.append(Candidate(run.managed_location(staging), name_try, record))
    found = adoptable(candidates, table.txn_id, table.try_number, run.request.durable or "")
    if found is None:
        if candidates:
            run.log.info("durable: earlier tries' staging does not match this try's query and settings; not adopted")
        return None
    record = found.record
    why = mismatch(record, mechanism=plan.mechanism.value, columns=_columns(plan), registered=True)
    if why:
        run.log.info(f"durable: not adopting the staging of try {record.prepared_by_try}: {why}")
        return None
    staging = table.staging_table(found.name_try)
    props = run.catalog.properties(staging)
    if props is None or not markers.owned_by(props, table.txn_id) or markers.marker_try(props) != record.held_by_try:
        return None  # a newer try took it over, or dropped it, meanwhile
    with run.user_metadata():
        run.catalog.set_properties(staging, {markers.TRY_NUMBER: str(table.try_number)})
    fs.write_text(_record_path(found.location), record.held_by(table.try_number).to_json())
    run.details["row_count"] = record.row_count
    run.details["adopted_from_try"] = record.prepared_by_try
    run.details["staging_table"] = staging.qualified
    return replace(plan, stages=True, adopted=found), (
        f"{staging} (adopted: try {record.prepared_by_try} wrote {record.row_count} rows at {record.prepared_at}; "
        f"its markers now name try {table.try_number})"
    )
