"""A publish group: Iceberg tables on one REST catalog, staged by their own tasks (each on its
branch, audited, held) and published together by the group's publisher task in one multi-table
commit (``POST /v1/{prefix}/transactions/commit``, Iceberg's ``RESTCatalog.commitTransaction``).

The group is a two-phase table of its own (kind ``iceberg_group``): its transaction is the
publisher task instance's, its members are the members' serialized tables as they held. Per member
the commit moves ``main`` to the held snapshot, drops the member's branch and fence and stamps the
member's provenance, with the requirements a single publish has: the member's branch still at its
held snapshot (a newer try of the member drops it, so a superseded member fails the whole commit)
and ``main`` still where the member began. A member whose table already shows this group's publish
(a retry of the publisher after a commit whose answer was lost) is not sent again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.cleanup import without_branches
from airflow_provider_ctas.catalogs.iceberg.group_table import GROUP, GROUP_SNAPSHOTS, IcebergGroup, held, require_held
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable, branch_try
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.phase_executor import PhaseExecutor
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.core import faults, markers
from airflow_provider_ctas.core.errors import CorruptStateError, FencedError, PublishError, UnsupportedTargetError
from airflow_provider_ctas.core.protocol import Reached
from airflow_provider_ctas.core.transaction import (
    Outcome,
)
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.core.protocol import PhaseReport, PhaseRequest
    from airflow_provider_ctas.spark.engine import Reporter


class IcebergGroupExecutor(PhaseExecutor[IcebergGroup, None]):
    """The publisher's driver side: ``commit`` publishes every member in one catalog commit,
    ``abort`` removes every member's staging (their markers checked). It stages nothing itself."""

    def __init__(self, spark: SparkSession, group: IcebergGroup, request: PhaseRequest, log: Reporter) -> None:
        super().__init__(spark, group, request, log)
        self.group = group
        self._catalog: IcebergCatalog | None = None

    def spark_jobs(self) -> int | None:
        return None

    def begin(self, report: PhaseReport) -> None:
        raise CorruptStateError("a publish group runs commit or abort, not begin")

    def prepare(self, report: PhaseReport) -> None:
        raise CorruptStateError("a publish group runs commit or abort, not prepare")

    def keep_for_next_try(self, digest: str) -> str:
        raise UnsupportedTargetError("a publish group's publisher has no staging of its own")

    def catalog(self) -> IcebergCatalog:
        if self._catalog is None:
            catalog = IcebergCatalog(self.spark, self.group.members[0].target.catalog)
            if catalog.type != "rest":
                raise UnsupportedTargetError(
                    f"publish groups need an Iceberg REST catalog; {catalog.name!r} is type={catalog.type}"
                )
            self._catalog = catalog
            self.details["metastore_uris"] = catalog.uri
        return self._catalog

    def run(self, phase: str, report: PhaseReport) -> None:
        if phase not in ("commit", "abort"):
            raise CorruptStateError(f"a publish group runs commit or abort, not {phase!r}")
        super().run(phase, report)

    # -- commit --------------------------------------------------------------------------------

    def commit(self, report: PhaseReport) -> None:
        require_held(self.group.members)
        catalog, published_at = self.catalog(), now_iso()
        snapshots = json.dumps({m.target.qualified: held(m)["snapshot_id"] for m in self.group.members}, sort_keys=True)
        tables = {member.txn_id: self._load(member) for member in self.group.members}
        pending = [m for m in self.group.members if not self._landed(m, tables[m.txn_id])]
        if pending:
            commits = catalog.jvm.java.util.ArrayList()
            for member in pending:
                base = catalog.refresh(tables[member.txn_id])
                updated = self._publish_change(member, base, published_at, snapshots)
                ident = catalog.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(
                    f"{member.target.database}.{member.target.table}"
                )
                commits.add(catalog.jvm.org.apache.iceberg.catalog.TableCommit.create(ident, base, updated))
            faults.inject(self.request.faults, "before_publish", self.group.try_number, self.log.info)
            self._send(commits, pending, tables, report)
        self.progress.publish()
        fresh = len(pending) == len(self.group.members)
        self.progress.outcome = Outcome.PUBLISHED if pending else Outcome.ALREADY_PUBLISHED
        self.progress.reached = Reached.COMMITTED
        self.details["members"] = {
            m.target.qualified: {
                "outcome": (Outcome.PUBLISHED if m in pending else Outcome.ALREADY_PUBLISHED).value,
                "snapshot_id": held(m)["snapshot_id"],
                "row_count": m.details.get("row_count"),
                "txn_id": m.txn_id,
                "try_number": m.try_number,
            }
            for m in self.group.members
        }
        self.details["publish"] = {"mechanism": "multi-table commit", "members": len(self.group.members)}
        faults.inject(self.request.faults, "after_group_publish", self.group.try_number, self.log.info)
        how = "in one multi-table commit" if fresh else f"({len(self.group.members) - len(pending)} had landed before)"
        report.touched.append(f"{len(pending)} member(s) published {how}: {', '.join(str(m.target) for m in pending)}")

    def _load(self, member: IcebergTable) -> Any:
        table = self.catalog().load(member.target)
        if table is None:
            raise PublishError(f"{member.target} was dropped after its member prepared; no member was published")
        return table

    def _landed(self, member: IcebergTable, table: Any) -> bool:
        props = md.properties(self.catalog().refresh(table))
        return (
            props.get(GROUP) == self.group.txn_id
            and markers.owned_by(props, member.txn_id)
            and markers.marker_try(props) == member.try_number
        )

    def _publish_change(self, member: IcebergTable, base: Any, published_at: str, snapshots: str) -> Any:
        """``base`` with ``main`` moved to the member's held snapshot, its branch and fences gone and its
        provenance stamped; raises when the member's try was superseded or ``main`` moved."""
        catalog, record, branch = self.catalog(), held(member), member.branch
        staged, began_from = int(record["snapshot_id"]), int(record["base_snapshot_id"])
        raised = fence.tries(md.properties(base), member.txn_id)
        if not raised or max(raised) != member.try_number or md.refs(base).get(branch) != staged:
            raise FencedError(
                f"{member.target}: the try that prepared it (try {member.try_number}) is no longer its newest, or its "
                "branch moved; no member was published"
            )
        if md.main_snapshot(base) != began_from:
            raise PublishError(
                f"{member.target} changed since its member began (main is snapshot {md.main_snapshot(base)}, was "
                f"{began_from}): another writer committed; no member was published, re-run the group"
            )
        provenance = {
            **try_markers(member, published_at),
            markers.PUBLISHED_AT: published_at,
            markers.ROW_COUNT: str(member.details.get("row_count", "")),
            GROUP: self.group.txn_id,
            GROUP_SNAPSHOTS: snapshots,
            **({markers.CHECKS: record["checks"]} if record.get("checks") else {}),
        }
        builder = catalog.jvm.org.apache.iceberg.TableMetadata.buildFrom(base)
        if staged != began_from:  # an overwrite of no partitions staged nothing
            builder = builder.setBranchSnapshot(staged, "main")
        for name in md.refs(base):
            other = branch_try(name, member.txn_id)
            if other is not None and other != member.try_number:
                builder = builder.removeRef(name)
        builder = (
            builder.setRef(branch, catalog.branch_ref(staged, asserted=True))  # requires the branch at ``staged``
            .removeRef(branch)
            .removeProperties(catalog.java_set(fence.keys_of(md.properties(base), member.txn_id)))
            .setProperties(provenance)
        )
        return (catalog.with_comments(base, builder, member.comments) if member.comments else builder).build()

    def _send(self, commits: Any, pending: list[IcebergTable], tables: Mapping[str, Any], report: PhaseReport) -> None:
        """One multi-table commit. When it fails, the tables decide: the pending members' branches are
        removed first (a request still in flight requires them, so it can no longer apply), then
        every pending member showing this group's publish means it applied and its answer was lost,
        none means nothing was published."""
        try:
            self.catalog().catalog.commitTransaction(commits)
            return
        except Exception as exc:  # noqa: BLE001 - the tables say what happened
            failure = exc
        self.log.warning(f"commit: the group commit failed ({first_line(failure)}); reading its members")
        try:
            landed = [m for m in pending if self._landed(m, tables[m.txn_id])]
            if len(landed) < len(pending):
                report.touched += self._remove_staging()
                landed = [m for m in pending if self._landed(m, tables[m.txn_id])]
        except Exception as exc:  # noqa: BLE001 - the outcome is unknown until the catalog answers
            raise PublishError(
                f"the group commit failed ({first_line(failure)}) and the catalog cannot be read now "
                f"({first_line(exc)}); no member is published by a later commit of this try"
            ) from failure
        if len(landed) == len(pending):
            report.note = "the catalog did not confirm the group commit; every member shows it, so it happened"
            return
        if landed:
            self.progress.publish()
            raise PublishError(
                f"the catalog applied the group commit to {', '.join(str(m.target) for m in landed)} only "
                f"({first_line(failure)}): it does not apply multi-table commits atomically"
            ) from failure
        raise PublishError(
            f"the group commit was refused, no member was published and their staging is removed: {first_line(failure)}"
        ) from failure

    # -- abort ---------------------------------------------------------------------------------

    def abort(self, report: PhaseReport) -> None:
        report.touched += self._remove_staging()
        self.progress.reached = Reached.ABORTED
        self.progress.outcome = Outcome.ABORTED

    def clean_up_this_try(self) -> list[str]:
        """Nothing: a publisher run that failed before its commit (its task lost, the catalog
        unreachable) leaves the members' held staging to its next try, which publishes it; a
        refused commit has removed it already, and GC removes what no try publishes."""
        return []

    def _remove_staging(self) -> list[str]:
        """Every member's branches of its tries up to the held one, with their fences (one metadata
        swap per table, only while no newer try of the member raised a fence)."""
        catalog, touched = self.catalog(), []
        for member in self.group.members:
            table = catalog.load(member.target)
            if table is None:
                continue
            dropped: list[str] = []

            def drop(base: Any, builder: Any, member: IcebergTable = member, dropped: list[str] = dropped) -> Any:
                newest = fence.newest(md.properties(base), member.txn_id)
                if newest is not None and newest > member.try_number:
                    return None  # a newer try of the member owns its staging now
                return without_branches(catalog, base, builder, member.txn_id, member.try_number, dropped)

            catalog.commit(table, drop)
            touched += [f"{member.target} (branch {name} dropped)" for name in dropped]
        return touched
