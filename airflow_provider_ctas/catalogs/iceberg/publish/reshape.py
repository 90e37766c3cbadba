"""A replace that changes the target's shape (``reshape.py``): one metadata swap gives the target the
staging table's schema and partition spec and moves ``main`` to an overwrite snapshot of the
staging table's data files, recorded under that schema; it removes this try's branch and fence and
records provenance. It is checked on the metadata it replaces, as a branch publish is (the fence
names this try, its branch is there, ``main`` has not moved), and the target's id counters are
those begin computed the new ids against.

The snapshot is made by Iceberg's own overwrite, inside a transaction that starts from the new
metadata (``Transactions.replaceTableTransaction``) and is never committed itself: its result is
the metadata the swap installs. A transaction's own commit of a replace is last-committer-wins;
this swap is not."""

from __future__ import annotations

from typing import Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish, Staged
from airflow_provider_ctas.catalogs.iceberg.publish.branch import commit_or_decide
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.shape import without_other_tries
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError, PublishError
from airflow_provider_ctas.core.protocol import PhaseReport


def publish_reshape(
    run: IcebergRun, plan: IcebergPlan, staged: Staged, checks: dict[str, str], report: PhaseReport
) -> Staged:
    catalog, table = run.catalog, run.table
    target, txn, try_number, branch = table.target, table.txn_id, table.try_number, table.branch
    staging_ref, reshape = table.staging_table(), plan.reshape
    staging, existing = catalog.load(staging_ref), catalog.load(target)
    if reshape is None or staging is None:
        raise FencedError(f"staging table {staging_ref} of try {try_number} is gone: a newer try has taken over")
    if existing is None:
        raise PublishError(f"{target} was dropped while this try ran; nothing was published")
    shape = staging.operations().refresh()
    props = md.properties(shape)
    if not markers.owned_by(props, txn) or markers.marker_try(props) != try_number:
        raise FencedError(f"{staging_ref} does not carry try {try_number}'s markers; not publishing")
    if md.main_snapshot(shape) != staged.snapshot_id:
        raise FencedError(f"{staging_ref} no longer holds this try's snapshot {staged.snapshot_id}")
    files = _data_files(staging)
    published_at = now_iso()
    provenance = {
        **try_markers(table, published_at),
        markers.PUBLISHED_AT: published_at,
        markers.ROW_COUNT: str(staged.row_count),
        **checks,
    }
    comment = table.comments.table
    published: list[int] = []

    def publish(base: Any, builder: Any) -> Any:
        run.still_ours(base)
        run.fault("publish_checked")  # tests: a newer try begins between this check and the commit
        main = md.main_snapshot(base)
        if main != plan.base_snapshot:
            raise PublishError(
                f"{target} changed since this try began (main is snapshot {main}, was {plan.base_snapshot}): "
                "another writer committed; the next try builds on the new version"
            )
        if (base.lastColumnId(), base.lastAssignedPartitionId()) != (reshape.last_column_id, reshape.last_partition_id):
            raise PublishError(
                f"{target}'s schema or partitioning changed since this try began; the next try reshapes the new version"
            )
        builder = (
            without_other_tries(base, builder, txn, try_number)
            .setRef(branch, catalog.branch_ref(md.refs(base)[branch], asserted=True))
            .removeRef(branch)
            .removeProperties(catalog.java_set(fence.keys_of(md.properties(base), txn)))
            .setProperties({**provenance, **({"comment": comment} if comment is not None else {})})
            .setCurrentSchema(shape.schema(), max(base.lastColumnId(), shape.lastColumnId()))
            .setDefaultPartitionSpec(shape.spec())
        )
        final = _with_snapshot(run, existing, builder.build(), files)
        published[:] = [int(final.currentSnapshot().snapshotId())]
        return catalog.jvm.org.apache.iceberg.TableMetadata.buildFrom(final)

    def landed(base: Any) -> bool:
        current = md.properties(base)
        return current.get(markers.PUBLISHED_AT) == published_at and markers.owned_by(current, txn)

    decided = commit_or_decide(run, existing, publish, landed, report)
    snapshot = int(catalog.refresh(existing).currentSnapshot().snapshotId()) if decided else published[0]
    run.progress.publish()
    run.details["publish"] = {"mechanism": Publish.RESHAPE.value, "snapshot_id": snapshot}
    run.details["snapshot_id"] = snapshot
    report.touched.append(f"{target} (new schema and partitioning; main -> snapshot {snapshot} of {len(files)} files)")
    run.warn_if(catalog.drop(staging_ref))
    report.touched.append(f"{staging_ref} (dropped; its data files are now {target}'s)")
    return Staged(snapshot, staged.row_count)


def _data_files(staging: Any) -> list[Any]:
    files, tasks = [], staging.newScan().planFiles()
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            files.append(iterator.next().file())
    finally:
        tasks.close()
    return files


def _with_snapshot(run: IcebergRun, existing: Any, start: Any, files: list[Any]) -> Any:
    """``start`` with one overwrite snapshot on ``main`` that removes every current file and adds
    ``files`` (re-bound to ``start``'s default spec, which has the staging spec's fields)."""
    iceberg = run.catalog.jvm.org.apache.iceberg
    txn = iceberg.Transactions.replaceTableTransaction(str(existing.name()), existing.operations(), start)
    spec = txn.table().spec()
    overwrite = txn.newOverwrite().overwriteByRowFilter(iceberg.expressions.Expressions.alwaysTrue())
    for f in files:
        metrics = iceberg.Metrics(
            f.recordCount(), f.columnSizes(), f.valueCounts(), f.nullValueCounts(), f.nanValueCounts(),
            f.lowerBounds(), f.upperBounds(),
        )  # fmt: skip
        overwrite.addFile(
            iceberg.DataFiles.builder(spec).withPath(f.location()).withFormat(f.format())
            .withFileSizeInBytes(f.fileSizeInBytes()).withPartition(f.partition()).withMetrics(metrics)
            .withSplitOffsets(f.splitOffsets()).withEncryptionKeyMetadata(f.keyMetadata()).build()
        )  # fmt: skip
    for key, value in try_markers(run.table).items():
        overwrite.set(key, value)
    overwrite.commit()
    return txn.table().operations().current()
