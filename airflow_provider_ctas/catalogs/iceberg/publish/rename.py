"""A new target: the staging table, stamped with its provenance, is renamed to the target (one
catalog call, which fails if the target appeared meanwhile), unless a newer try has a staging table."""

from __future__ import annotations

from typing import Any

from airflow_provider_ctas.catalogs.existing_target import after_lost_race, appeared
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.plan import Publish, Staged
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError, PublishError, TargetExistsError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.core.requirements import AssertNoNewerStaging, Observed
from airflow_provider_ctas.spark.errors import first_line


def publish_by_rename(run: IcebergRun, staged: Staged, checks: dict[str, str], report: PhaseReport) -> Any | None:
    """Publishes, or decides the outcome of a lost race. Returns the target when another task
    instance created it first and this ``overwrite_partitions`` try must write its partitions into it."""
    catalog, table = run.catalog, run.table
    staging, target = table.staging_table(), table.target
    loaded = catalog.load(staging)
    if loaded is None:
        raise FencedError(
            f"staging table {staging} of try {table.try_number} is gone: a newer try of this task "
            "instance has taken over, so this try must not publish"
        )

    def stamp(base: Any, builder: Any) -> Any:
        props = md.properties(base)
        if not markers.owned_by(props, table.txn_id) or markers.marker_try(props) != table.try_number:
            raise FencedError(f"{staging} does not carry try {table.try_number}'s markers; not publishing")
        return builder.setProperties(
            {markers.PUBLISHED_AT: now_iso(), markers.ROW_COUNT: str(staged.row_count), **checks}
        )

    catalog.commit(loaded, stamp)  # carried over by the rename, as the session catalog's markers are
    # An older try that stalled inside its begin created its staging after a newer try's begin
    # cleaned up: the newer try's staging table is what fences it.
    names = frozenset(catalog.table_names(target.database))
    AssertNoNewerStaging(table.txn_id, table.try_number).validate(Observed(names=names))
    try:
        catalog.rename(staging, target)
    except Exception as exc:
        if appeared(lambda: catalog.load(target)) is None:
            if catalog.load(staging) is None:
                raise FencedError(f"staging table {staging} was dropped by a newer try during the publish") from exc
            if md.java_class(exc).endswith("AlreadyExistsException"):
                raise TargetExistsError(f"{target} exists but is not an Iceberg table; it is left untouched") from exc
            raise PublishError(f"could not rename {staging} to {target}: {first_line(exc)}") from exc
        return _lost_race(run, report)
    run.progress.publish()
    run.details["publish"] = {"mechanism": Publish.RENAME.value}
    report.touched.append(f"{staging} -> {target} (renamed; no data moved)")
    return None


def _lost_race(run: IcebergRun, report: PhaseReport) -> Any | None:
    catalog, table = run.catalog, run.table
    target, staging = table.target, table.staging_table()
    current = catalog.current(target)
    run.warn_if(catalog.drop(staging))
    report.touched.append(f"{staging} (dropped: {target} appeared)")
    props = md.properties(current) if current is not None else {}
    existing = catalog.load(target)
    if table.mode is Mode.OVERWRITE_PARTITIONS and existing is not None and not markers.owned_by(props, table.txn_id):
        # Another task instance created it first (a backfill's first dates): no earlier try of
        # this one wrote into it; this try's partitions go into it, staged as for any target.
        return existing
    after_lost_race(table, props, run.progress, run.details)
    return None
