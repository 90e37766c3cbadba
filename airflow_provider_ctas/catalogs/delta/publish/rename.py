"""A new target: the checked staging table is renamed to it (one metastore call, which fails if the
target appeared), under the claim on the target's name (``metastore/name_claim.py``). In
``overwrite_partitions``, a target another task instance created meanwhile has this try's
partitions written into it, from the staging table, as an existing target would."""

from __future__ import annotations

from airflow_provider_ctas.catalogs.delta import durable
from airflow_provider_ctas.catalogs.delta.begin import in_place
from airflow_provider_ctas.catalogs.delta.plan import DeltaPlan, Publish
from airflow_provider_ctas.catalogs.delta.publish.in_place import publish_in_place
from airflow_provider_ctas.catalogs.delta.run import DeltaRun
from airflow_provider_ctas.catalogs.delta.staging import drop_staging, require_own_staging, staging_of
from airflow_provider_ctas.catalogs.existing_target import after_lost_race, appeared
from airflow_provider_ctas.catalogs.metastore.name_claim import name_claimed
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError, PublishError
from airflow_provider_ctas.core.identifiers import sql_string_literal
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.spark.errors import first_line


def publish_by_rename(run: DeltaRun, plan: DeltaPlan, checks: dict[str, str], report: PhaseReport) -> None:
    table, staging, target = run.table, staging_of(run, plan), run.table.target
    require_own_staging(run, plan)
    if checks:  # carried over by the rename
        with run.user_metadata():
            value = sql_string_literal(checks[markers.CHECKS])
            run.spark.sql(f"ALTER TABLE {staging.quoted} SET TBLPROPERTIES ('{markers.CHECKS}' = {value})")
    try:
        # The metastore moves the staging's directory: no other creator's rename may overlap.
        with name_claimed(run.catalog, target, try_markers(table), run.log):
            run.fault("publish_before_rename")
            # A try stalled inside its begin made its staging after the newer try's begin cleaned up.
            run.catalog.require_no_newer_try(target.database, table.txn_id, table.try_number)
            run.catalog.rename(staging, target)
    except FencedError:
        raise
    except Exception as exc:
        current = appeared(lambda: run.catalog.table_info(target))
        if current is None:
            if run.catalog.properties(staging) is None:
                raise FencedError(f"staging table {staging} was dropped by a newer try during the publish") from exc
            raise PublishError(f"could not rename {staging} to {target}: {first_line(exc)}") from exc
        if table.mode is Mode.OVERWRITE_PARTITIONS and not markers.owned_by(current.properties, table.txn_id):
            # Another task instance created the table first (a backfill's first dates): no earlier
            # try of this one wrote into it, so there is nothing to fence; the staged rows go in.
            publish_in_place(run, in_place(run, plan, current, stages=True), checks, report)
            return
        drop_staging(run, up_to=table.try_number, first=plan.adopted.name_try if plan.adopted else table.try_number)
        report.touched.append(f"{staging} (dropped: {target} appeared)")
        after_lost_race(table, current.properties, run.progress, run.details)
        return
    run.progress.publish()
    run.details["publish"] = {"mechanism": Publish.RENAME.value}
    report.touched.append(f"{staging} -> {target} (renamed)")
    if run.request.durable:
        durable.remove_record(run, target)
