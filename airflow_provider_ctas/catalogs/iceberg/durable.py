"""A prepared try kept for the next (``durable=True``): the branch stays, recorded in a table
property; the next try adopts it in the one metadata swap that raises its fence, or stages its own
when the record does not match what it would write (``adoption.py`` reads the records)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.audit import results_to_details
from airflow_provider_ctas.catalogs.iceberg import adoption, fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.adoption import KeptBranch
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish, Staged
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.shape import require_same_shape, without_other_tries
from airflow_provider_ctas.catalogs.iceberg.table import branch_name
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.core.checks import CheckResult, summary
from airflow_provider_ctas.core.durable import PreparedRecord, mismatch
from airflow_provider_ctas.core.errors import UnsupportedTargetError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def adopt(run: IcebergRun, existing: Any, schema: StructType) -> tuple[IcebergPlan, str] | None:
    """Takes over an earlier try's kept branch in one metadata swap; None when there is none this
    try may adopt, and it stages its own."""
    catalog, table = run.catalog, run.table
    target, txn, try_number = table.target, table.txn_id, table.try_number
    current = catalog.refresh(existing)
    kept = adoption.candidate(md.properties(current), txn, try_number, run.request.durable or "")
    if kept is None:
        return None
    earlier = kept.record.held_by_try
    why = mismatch(kept.record, mechanism="branch", columns=adoption.columns_of(schema), registered=False)
    if why:
        run.log.info(f"begin: not adopting the branch kept by try {earlier}: {why}")
        return None
    partition_fields = require_same_shape(target.qualified, current, schema, table.partition_by)
    held, mine = branch_name(txn, earlier), kept.held_by(try_number)
    begun = fence.begun_record(now_iso(), table.key.to_dict())

    def take_over(base: Any, builder: Any) -> Any:
        props = md.properties(base)
        run.not_superseded(props)
        if md.refs(base).get(held) != kept.snapshot_id or md.main_snapshot(base) != kept.base_snapshot_id:
            raise adoption.NotAdoptable
        builder = without_other_tries(base, builder, txn, try_number)
        older = fence.keys_of(props, txn, up_to=try_number - 1)
        if older:
            builder = builder.removeProperties(catalog.java_set(older))
        return builder.setRef(table.branch, catalog.branch_ref(kept.snapshot_id)).setProperties(
            {fence.fence_key(txn, try_number): begun, fence.prepared_key(txn, try_number): mine.to_json()}
        )

    try:
        catalog.commit(existing, take_over)
    except adoption.NotAdoptable:
        run.log.info(f"begin: the branch kept by try {earlier} changed meanwhile; staging this try's own")
        return None
    run.refresh_spark()
    run.details.update(
        {
            "publish_mechanism": Publish.BRANCH.value,
            "base_snapshot_id": kept.base_snapshot_id,
            "snapshot_id": kept.snapshot_id,
            "row_count": kept.record.row_count,
            "adopted_from_try": kept.record.prepared_by_try,
        }
    )
    plan = IcebergPlan(Publish.BRANCH, schema, kept.base_snapshot_id, partition_fields, adopted=mine)
    return plan, (
        f"{target} (branch {held} adopted as {table.branch} at snapshot {kept.snapshot_id}, prepared by try "
        f"{kept.record.prepared_by_try}; fence raised to try {try_number})"
    )


def keep(run: IcebergRun, plan: IcebergPlan, staged: Staged, digest: str, checks: Sequence[CheckResult]) -> str:
    """Records this try's prepared branch (and its checks' results) for the next try, whose task is
    gone."""
    catalog, table = run.catalog, run.table
    target, txn, try_number = table.target, table.txn_id, table.try_number
    existing = catalog.load(target)
    if plan.mechanism is not Publish.BRANCH or plan.base_snapshot is None or existing is None:
        raise UnsupportedTargetError(
            "an Iceberg staging table (a new table, or a replace that changes the shape) is not kept for the next try"
        )
    kept = plan.adopted or KeptBranch(
        PreparedRecord(
            txn_id=txn, digest=digest, prepared_by_try=try_number, held_by_try=try_number,
            row_count=staged.row_count, mechanism="branch", columns=adoption.columns_of(plan.schema),
            registered=False, prepared_at=now_iso(), checks=tuple(results_to_details(checks)),
            checks_summary=summary(checks) if checks else "",
        ),
        staged.snapshot_id,
        plan.base_snapshot,
    )  # fmt: skip
    key = fence.prepared_key(txn, try_number)

    def record(base: Any, builder: Any) -> Any:
        run.still_ours(base)
        return builder.setProperties({key: kept.to_json()})

    catalog.commit(existing, record)
    return f"{target} (property {key})"
