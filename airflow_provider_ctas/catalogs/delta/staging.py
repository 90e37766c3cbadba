"""This try's staging table: created empty with its markers in its first commit, written in a
second, checked before a publish reads it, and dropped (markers checked first, in the catalog or,
where a killed try left no catalog entry, in the table's first logged commit)."""

from __future__ import annotations

from airflow_provider_ctas.catalogs.delta import log as delta_log
from airflow_provider_ctas.catalogs.delta.plan import DeltaPlan
from airflow_provider_ctas.catalogs.delta.run import DeltaRun
from airflow_provider_ctas.catalogs.delta.table import FORMAT
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.provenance import new_table_properties
from airflow_provider_ctas.catalogs.write_observation import WriteObservation
from airflow_provider_ctas.core.errors import PublishError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.requirements import AssertOwnStaging, Observed
from airflow_provider_ctas.spark.ddl import create_table_sql


def staging_of(run: DeltaRun, plan: DeltaPlan) -> TableRef:
    """This try's staging table: the one it writes, or the one it adopted (named for its writer)."""
    return run.table.staging_table(plan.adopted.name_try if plan.adopted else None)


def create_staging(run: DeltaRun, plan: DeltaPlan) -> str:
    staging = run.table.staging_table()
    with run.user_metadata():
        # Empty first, so the markers are in the table's first commit: a write killed after it
        # leaves a table (or at least a log) that says which try made it.
        props = new_table_properties(run.table)
        run.spark.sql(
            create_table_sql(staging.quoted, plan.schema, FORMAT, run.table.partition_by, props, comments=plan.comments)
        )
    return f"{staging} (created, empty)"


def write_staging(run: DeltaRun, observation: WriteObservation) -> tuple[str, int]:
    """Appends the query's rows to the (created) staging table, observed for the checks the write
    measures; what it touched, and the rows."""
    staging = run.table.staging_table()

    def append() -> None:
        frame = observation.for_checks(run.query(), lambda: run.spark.table(staging.quoted).schema)
        with run.engine.progress(f"prepare {run.table.target}", run.log), run.user_metadata():
            # The append carries no application version: on a table nobody else writes it would only
            # cost Delta a state reconstruction (measured: +3 s); retries read the published table's
            # markers instead.
            frame.writeTo(staging.quoted).append()
        observation.collect(run.log)

    # A write that fails commits nothing to the Delta log: nothing of it is left to read.
    observation.write(append, run.log, rewritable=lambda: True)
    commit = run.logged_commit(staging.quoted, run.managed_location(staging), version=1)
    if commit is None:
        raise PublishError(f"try {run.table.try_number}'s commit is not in {staging}'s history")
    return f"{staging} (written: {commit.rows} rows)", commit.rows


def require_own_staging(run: DeltaRun, plan: DeltaPlan) -> None:
    staging, table = staging_of(run, plan), run.table
    observed = Observed(properties=run.catalog.properties(staging))
    AssertOwnStaging(table.txn_id, table.try_number, str(staging)).validate(observed)


def drop_staging(run: DeltaRun, up_to: int, first: int = 1) -> list[str]:
    """Staging tables named for tries ``first..up_to`` of this transaction and held by one of them
    (the try that wrote it or one that adopted it), each checked for our markers; where there is no
    table, the directory of one killed between its first Delta commit and its catalog entry, if that
    commit's markers name the try, or an empty one."""
    touched, fs, txn = [], run.catalog.fs, run.table.txn_id
    for try_number in range(first, up_to + 1):
        staging = run.table.staging_table(try_number)
        props = run.catalog.properties(staging) if run.spark.catalog.tableExists(staging.quoted) else None
        if props is None:
            leftover = run.managed_location(staging)
            logged = delta_log.created_properties(fs, leftover)
            if logged is not None and ownership.is_staging_of(logged, txn, try_number):
                fs.delete(leftover)
                touched.append(f"{leftover} (deleted: try {try_number}'s staging log, without its table)")
            elif fs.exists(leftover) and not fs.has_files(leftover):
                fs.delete(leftover)
                touched.append(f"{leftover} (deleted: empty)")
            elif fs.exists(leftover):
                run.log.warning(f"{leftover} has no Delta log of try {try_number}'s staging table; left alone")
        elif ownership.holds_staging(props, txn, try_number, up_to):
            # No PURGE: Delta's catalog refuses it; dropping a managed Delta table deletes its files.
            run.spark.sql(f"DROP TABLE IF EXISTS {staging.quoted}")
            touched.append(f"{staging} (dropped)")
        else:
            run.log.warning(f"{staging} does not carry this transaction's markers; left alone")
    return touched
