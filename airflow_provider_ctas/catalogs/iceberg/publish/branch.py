"""An existing target: one metadata swap moves ``main`` to this try's branch only if the fence still
names this try, the branch is this try's and ``main`` has not moved since begin, and in the same
swap drops the branch and the fence and records provenance. ``overwrite_partitions`` first
re-applies its partitions on a ``main`` that moved meanwhile (``rebase.py``). A publish group's
member holds its branch instead, for the group's publisher (``group.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.cleanup import drop_branches
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish, Staged
from airflow_provider_ctas.catalogs.iceberg.rebase import partition_names, rebase
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.shape import without_other_tries
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError, PublishError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.spark.errors import first_line

REBASES = 5
"""How often an ``overwrite_partitions`` publish re-applies its partitions on a ``main`` that keeps moving."""


def publish_branch(
    run: IcebergRun, plan: IcebergPlan, staged: Staged, checks: dict[str, str], report: PhaseReport
) -> Staged:
    """Publishes; returns what was published (a re-applied ``overwrite_partitions`` is a new snapshot)."""
    catalog, table = run.catalog, run.table
    target, txn, try_number, branch = table.target, table.txn_id, table.try_number, table.branch
    existing = catalog.load(target)
    if existing is None:
        raise PublishError(f"{target} was dropped while this try ran; nothing was published")
    published_at = now_iso()
    provenance = {
        **try_markers(table, published_at),
        markers.PUBLISHED_AT: published_at,
        markers.ROW_COUNT: str(staged.row_count),
        **checks,
    }
    partial = table.mode is Mode.OVERWRITE_PARTITIONS
    staged_nothing = partial and staged.wrote_nothing(plan)
    moved: list[int] = []

    def publish(base: Any, builder: Any) -> Any | None:
        run.still_ours(base)
        run.fault("publish_checked")  # tests: a newer try begins between this check and the commit
        snapshot = md.refs(base)[branch]
        moved.clear()
        if not staged_nothing and _main_moved(run, plan, base, snapshot):
            moved.append(snapshot)
            return None
        if not staged_nothing:
            builder = builder.setBranchSnapshot(snapshot, "main")
        # An earlier try's branch here was re-made by a zombie's late write: it goes too.
        builder = (
            without_other_tries(base, builder, txn, try_number)
            .setRef(branch, catalog.branch_ref(snapshot, asserted=True))
            .removeRef(branch)
            .removeProperties(catalog.java_set(fence.keys_of(md.properties(base), txn)))
            .setProperties(provenance)
        )
        return catalog.with_comments(base, builder, table.comments) if table.comments else builder

    def landed(base: Any) -> bool:
        props = md.properties(base)
        return props.get(markers.PUBLISHED_AT) == published_at and markers.owned_by(props, txn)

    snapshot = staged.snapshot_id
    for _ in range(REBASES):
        if commit_or_decide(run, existing, publish, landed, report) or not moved:
            break
        snapshot = rebase(catalog, existing, branch=branch, staged=moved[0], began_from=plan.base_snapshot or 0,
                          still_ours=run.still_ours, summary=provenance)  # fmt: skip
        report.touched.append(f"{target} (branch {branch}: partitions re-applied on the moved main, {snapshot})")
        run.details["snapshot_id"] = snapshot
    else:
        raise PublishError(f"{target}'s main kept moving; {REBASES} re-applications did not catch up")
    run.progress.publish()
    run.details["publish"] = {"mechanism": Publish.BRANCH.value, "snapshot_id": snapshot}
    if partial:
        run.details["publish"]["partitions"] = [] if staged_nothing else partition_names(existing, snapshot)
    report.touched.append(f"{target} (main -> snapshot {snapshot} of branch {branch})")
    return Staged(snapshot, staged.row_count)


def hold(run: IcebergRun, plan: IcebergPlan, staged: Staged, checks: dict[str, str], report: PhaseReport) -> None:
    """Checks the branch is still this try's and reports it for the group's publisher."""
    catalog, target, branch = run.catalog, run.table.target, run.table.branch
    existing = catalog.load(target)
    if existing is None or plan.mechanism is not Publish.BRANCH:
        raise PublishError(f"{target} was dropped while this try ran; nothing is held")
    base = catalog.refresh(existing)
    run.still_ours(base)
    if md.refs(base).get(branch) != staged.snapshot_id:
        raise FencedError(f"branch {branch} no longer holds this try's snapshot {staged.snapshot_id}")
    run.details["held"] = {
        "branch": branch,
        "snapshot_id": staged.snapshot_id,
        "base_snapshot_id": plan.base_snapshot,
        "checks": checks.get(markers.CHECKS),
    }
    report.touched.append(f"{target} (branch {branch} at snapshot {staged.snapshot_id}, held for its publish group)")


def commit_or_decide(
    run: IcebergRun, existing: Any, change: Callable[[Any, Any], Any | None], landed: Callable[[Any], bool],
    report: PhaseReport,
) -> bool:  # fmt: skip
    """Commits ``change``; True when the catalog did not report the outcome and the table showed
    it had applied.

    Without an outcome, this try's branch is removed first, so that the request, should it still
    be in flight, can no longer apply (it requires the branch at its staged snapshot), and the
    table read once more decides."""
    catalog = run.catalog
    try:
        catalog.commit(existing, change)
        return False
    except md.CommitUnknown as exc:
        unknown = exc
    try:
        if not landed(catalog.refresh(existing)):
            report.touched += drop_branches(run, up_to=run.table.try_number)
            if not landed(catalog.refresh(existing)):
                raise PublishError(
                    f"the catalog did not confirm the publish and {run.table.target} does not show it: nothing "
                    "was published, this try's branch is removed"
                ) from unknown
    except PublishError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the catalog says, the outcome is not known
        raise PublishError(
            f"the catalog did not confirm the publish of {run.table.target} and cannot be read now "
            f"({first_line(exc)}); the next try's begin removes this try's branch first, so the publish either "
            "shows in the table by then or never will"
        ) from unknown
    report.note = "the catalog did not confirm the publish; the table shows it, so it happened"
    return True


def _main_moved(run: IcebergRun, plan: IcebergPlan, base: Any, staged: int) -> bool:
    """Whether ``main`` has moved past the snapshot this try's branch was staged on: an
    ``overwrite_partitions`` try then re-applies its partitions; a replace must not publish."""
    main = md.main_snapshot(base)
    partial = run.table.mode is Mode.OVERWRITE_PARTITIONS
    if md.parent_id(base, staged) == main and (partial or main == plan.base_snapshot):
        return False
    if not partial:
        raise PublishError(
            f"{run.table.target} changed since this try began (main is snapshot {main}, was "
            f"{plan.base_snapshot}): another writer committed; the next try builds on the new version"
        )
    return True
