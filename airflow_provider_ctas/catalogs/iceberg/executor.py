"""The Iceberg strategy's phases, inside the Spark driver.

begin    checks the catalog, decides what the target allows, cleans up earlier tries of this
         transaction and stages: a new target as an empty staging table with its markers, a
         replaced one as this try's branch of the target, created from ``main`` in the same metadata
         swap that raises the transaction's fence to this try and drops earlier tries' branches;
prepare  writes the query: appended to the staging table, or overwriting the branch, or (for
         ``overwrite_partitions``) the partitions it produces on the branch (``main`` is untouched,
         readers see the old version); the snapshot summary carries the provenance;
audit    (with checks) evaluates them on the staging table or the branch; a failed check publishes
         nothing;
hold     (a publish group's member, instead of commit) checks the branch is still this try's and
         reports it for the group's publisher (``group.py``), which publishes every member at once;
commit   a new target: renames staging to it (one metastore call, fails if the target appeared);
         a replaced one: one metadata swap that moves ``main`` to the branch's snapshot only if the
         fence still names this try, the branch is this try's and ``main`` has not moved since
         begin, and that in the same swap drops the branch and the fence and records provenance;
         ``overwrite_partitions`` first re-applies its partitions on a ``main`` that moved meanwhile
         (``rebase.py``), and writes into a target that another task instance created meanwhile;
abort    drops this and earlier tries' staging tables and branches (their markers checked first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.analysis import analyse_query, describe_schema
from airflow_provider_ctas.catalogs.audit import AuditTarget
from airflow_provider_ctas.catalogs.existing_target import after_lost_race, nothing_to_do
from airflow_provider_ctas.catalogs.iceberg import adoption, fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.adoption import KeptBranch
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.rebase import partition_names, rebase
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable, branch_name, branch_try
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso
from airflow_provider_ctas.catalogs.phase_executor import PhaseExecutor
from airflow_provider_ctas.catalogs.provenance import new_table_properties, try_markers
from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.durable import PreparedRecord, mismatch
from airflow_provider_ctas.core.errors import (
    DatabaseNotFoundError,
    FencedError,
    InvalidInputError,
    PublishError,
    TargetExistsError,
    UnsupportedTargetError,
)
from airflow_provider_ctas.core.identifiers import quote
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.partitioning import parse_field, source_columns
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.ddl import create_table_sql
from airflow_provider_ctas.spark.errors import first_line
from airflow_provider_ctas.spark.protocol import PhaseReport, PhaseRequest, Reached

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Reporter

SNAPSHOT_PROPERTY = "snapshot-property."
REBASES = 5
"""How often an ``overwrite_partitions`` publish re-applies its partitions on a ``main`` that keeps moving."""


class IcebergExecutor(PhaseExecutor[IcebergTable]):
    audits = True

    def __init__(self, spark: SparkSession, table: IcebergTable, request: PhaseRequest, log: Reporter) -> None:
        super().__init__(spark, table, request, log)
        self.catalog: IcebergCatalog | None = None
        self.base_snapshot: int | None = None
        """``main`` when this try's branch was made from it; None when staging is a new table."""
        self.columns: list[str] = []
        self.partition_fields: dict[str, str] = {}
        """Each ``partition_by`` entry's field name in the target's partition struct (``ts_day``)."""
        self.schema: StructType | None = None
        self.holds = "hold" in request.phases
        self.adopted: KeptBranch | None = None
        """With ``durable=True``: the earlier try's kept branch this try took over (``adoption.py``)."""
        """A publish group's member: it stages on a branch and its publisher publishes."""

    def clean_up_this_try(self) -> list[str]:
        return self._clean_tries(up_to=self.table.try_number)

    # -- phases ------------------------------------------------------------------------------

    def _catalog(self) -> IcebergCatalog:
        if self.catalog is None:
            self.catalog = IcebergCatalog(self.spark, self.table.target.catalog)
        return self.catalog

    def begin(self, report: PhaseReport) -> None:
        catalog, target = self._catalog(), self.table.target
        if catalog.type != "glue":  # a Glue catalog is named once Glue answered for the namespace (below)
            self.details["metastore_uris"] = catalog.uri
        self.details["spark_application"] = self.engine.application()
        if not catalog.namespace_exists(target.database):
            raise DatabaseNotFoundError(
                f"namespace {target.database!r} does not exist in catalog {target.catalog!r}; create it first"
            )
        self.details["metastore_uris"] = catalog.lineage_uri(target.database)
        if self.table.try_number > 1:
            report.touched += self._drop_staging(up_to=self.table.try_number - 1)
        existing = catalog.load(target)
        self.began = True
        if existing is not None and self._nothing_to_do(self._published_markers(existing)):
            report.note = f"outcome {self.outcome}; nothing staged"
            return
        if self.holds:
            _require_group_target(catalog, target, existing)
        schema = self._analyse()
        self.table.comments.require_columns(f.name for f in schema.fields)
        if existing is None:
            catalog.check_publish_by_rename()
            report.touched.append(self._create_staging(schema))
        else:
            adopted = self._adopt(existing, schema) if self.request.durable and self.table.try_number > 1 else None
            report.touched.append(adopted or self._create_branch(existing, schema))
        self.progress.reached = Reached.BEGUN

    def _nothing_to_do(self, props: Mapping[str, str]) -> bool:
        return nothing_to_do(self.table, props, self.progress, self.details, self.log)

    def _published_markers(self, existing: Any) -> Mapping[str, str]:
        """The markers of the target's last publish, or, for a retry of ``overwrite_partitions``, of
        this transaction's snapshot in ``main``'s history: other task instances publish to the same
        table, so its properties may name a later one."""
        current = existing.operations().refresh()
        props = md.properties(current)
        retried = self.table.mode is Mode.OVERWRITE_PARTITIONS and self.table.try_number > 1
        if retried and not markers.owned_by(props, self.table.txn_id):
            return md.ancestor_summary(current, self.table.txn_id) or props
        return props

    def _analyse(self) -> StructType:
        schema = analyse_query(self.spark, self.request.sql, self.engine, self.log, self.details)
        produced = {f.name.lower() for f in schema.fields}
        missing = [c for c in source_columns(self.table.partition_by) if c not in produced]
        if missing:
            raise InvalidInputError(f"partition_by names {missing}, which the query does not produce")
        describe_schema(schema, self.details)
        self.columns = [f.name for f in schema.fields]
        self.schema = schema
        return schema

    def _create_staging(self, schema: StructType) -> str:
        staging = self.table.staging_table()
        props = new_table_properties(self.table)
        self.spark.sql(
            create_table_sql(
                staging.quoted, schema, "iceberg", self.table.partition_by, props, comments=self.table.comments
            )
        )
        self.details["publish_mechanism"] = "rename"
        return f"{staging} (created, empty)"

    def _not_superseded(self, props: Mapping[str, str]) -> None:
        """Raises when a newer try of this task instance has raised its fence on the target."""
        fenced_at = fence.newest(props, self.table.txn_id) or 0
        if fenced_at > self.table.try_number:
            raise FencedError(f"try {fenced_at} of this task instance has begun; try {self.table.try_number} must not")

    def _create_branch(self, existing: Any, schema: StructType) -> str:
        target, txn, try_number = self.table.target, self.table.txn_id, self.table.try_number
        current = existing.operations().refresh()
        # overwrite_partitions always names partition_by, so this also checks it names the table's.
        self.partition_fields = _require_same_shape(target.qualified, current, schema, self.table.partition_by)
        branch, catalog = self.table.branch, self._catalog()
        begun = fence.begun_record(now_iso(), self.table.key.to_dict())

        def stage(base: Any, builder: Any) -> Any:
            props = md.properties(base)
            self._not_superseded(props)
            main = md.main_snapshot(base)
            if main is None:
                raise UnsupportedTargetError(
                    f"{target} has no snapshot yet (created empty); insert into it once, or drop it, first"
                )
            builder = _without_other_tries(base, builder, txn, try_number)
            self.base_snapshot = main
            older = fence.keys_of(props, txn, up_to=try_number - 1)
            if older:
                builder = builder.removeProperties(catalog.java_set(older))
            return builder.setRef(branch, catalog.branch_ref(main)).setProperties(
                {fence.fence_key(txn, try_number): begun}
            )

        catalog.commit(existing, stage)
        # Spark's catalog caches table metadata; the write must see the branch just made.
        self.spark.sql(f"REFRESH TABLE {target.quoted}")
        self.details["publish_mechanism"] = "branch"
        self.details["base_snapshot_id"] = self.base_snapshot
        return f"{target} (branch {branch} from snapshot {self.base_snapshot}; fence raised to try {try_number})"

    def _adopt(self, existing: Any, schema: StructType) -> str | None:
        """Takes over an earlier try's kept branch (durable=True) in one metadata swap; None when
        there is none this try may adopt, and it stages its own."""
        catalog, target, txn, try_number = self._catalog(), self.table.target, self.table.txn_id, self.table.try_number
        current = catalog.refresh(existing)
        kept = adoption.candidate(md.properties(current), txn, try_number, self.request.durable or "")
        if kept is None:
            return None
        earlier = kept.record.held_by_try
        why = mismatch(kept.record, mechanism="branch", columns=adoption.columns_of(schema), registered=False)
        if why:
            self.log.info(f"begin: not adopting the branch kept by try {earlier}: {why}")
            return None
        self.partition_fields = _require_same_shape(target.qualified, current, schema, self.table.partition_by)
        held, mine = branch_name(txn, earlier), kept.held_by(try_number)
        begun = fence.begun_record(now_iso(), self.table.key.to_dict())

        def adopt(base: Any, builder: Any) -> Any:
            props = md.properties(base)
            self._not_superseded(props)
            if md.refs(base).get(held) != kept.snapshot_id or md.main_snapshot(base) != kept.base_snapshot_id:
                raise adoption.NotAdoptable
            builder = _without_other_tries(base, builder, txn, try_number)
            older = fence.keys_of(props, txn, up_to=try_number - 1)
            if older:
                builder = builder.removeProperties(catalog.java_set(older))
            return builder.setRef(self.table.branch, catalog.branch_ref(kept.snapshot_id)).setProperties(
                {fence.fence_key(txn, try_number): begun, fence.prepared_key(txn, try_number): mine.to_json()}
            )

        try:
            catalog.commit(existing, adopt)
        except adoption.NotAdoptable:
            self.log.info(f"begin: the branch kept by try {earlier} changed meanwhile; staging this try's own")
            return None
        self.spark.sql(f"REFRESH TABLE {target.quoted}")
        self.adopted, self.base_snapshot = mine, kept.base_snapshot_id
        self.details.update(
            publish_mechanism="branch", base_snapshot_id=kept.base_snapshot_id, snapshot_id=kept.snapshot_id,
            row_count=kept.record.row_count, adopted_from_try=kept.record.prepared_by_try,
        )  # fmt: skip
        return (
            f"{target} (branch {held} adopted as {self.table.branch} at snapshot {kept.snapshot_id}, prepared by try "
            f"{kept.record.prepared_by_try}; fence raised to try {try_number})"
        )

    def keep_for_next_try(self, digest: str) -> str:
        target, txn, try_number = self.table.target, self.table.txn_id, self.table.try_number
        existing = self._catalog().load(target)
        if self.base_snapshot is None or self.schema is None or existing is None:
            raise UnsupportedTargetError(
                "a new Iceberg table's staging is not kept for the next try (only a branch is)"
            )
        kept = self.adopted or KeptBranch(
            PreparedRecord(
                txn_id=txn, digest=digest, prepared_by_try=try_number, held_by_try=try_number,
                row_count=int(self.details.get("row_count") or 0), mechanism="branch",
                columns=adoption.columns_of(self.schema), registered=False, prepared_at=now_iso(),
                checks=tuple(self.details.get("checks") or ()),
                checks_summary=self.audit_provenance().get(markers.CHECKS, ""),
            ),
            int(self.details["snapshot_id"]),
            self.base_snapshot,
        )  # fmt: skip
        key = fence.prepared_key(txn, try_number)

        def record(base: Any, builder: Any) -> Any:
            self._still_ours(base)
            return builder.setProperties({key: kept.to_json()})

        self._catalog().commit(existing, record)
        return f"{target} (property {key})"

    def prepare(self, report: PhaseReport) -> None:
        if self.adopted is not None:
            record = self.adopted.record
            report.note = f"adopted the branch of try {record.prepared_by_try}; the query did not run"
            report.touched.append(
                f"{self.table.target} ({record.row_count} rows on branch {self.table.branch}, adopted)"
            )
            self.progress.reached = Reached.PREPARED
            return
        if self.request.sql is None:
            raise InvalidInputError("no SQL was sent for this transaction")
        self.fault("before_write")
        report.touched.append(self._write(f"prepare {self.table.target}"))
        self.progress.reached = Reached.PREPARED
        self.fault("after_prepare")

    def _write(self, what: str) -> str:
        from pyspark.sql.functions import lit

        frame = self.spark.sql(as_subquery(self.request.sql or ""))
        provenance = try_markers(self.table)
        into = self._staged()
        writer = frame.writeTo(into).options(**{SNAPSHOT_PROPERTY + k: v for k, v in provenance.items()})
        with self.engine.progress(what, self.log):
            if self.base_snapshot is None:
                writer.append()
            elif self.table.mode is Mode.OVERWRITE_PARTITIONS:
                writer.overwritePartitions()
            else:
                writer.overwrite(lit(True))
        written = self._written_snapshot()
        self.details["row_count"] = int(written.get("added-records", "0"))
        self.details["snapshot_id"] = int(written["snapshot-id"])
        return f"{into} (snapshot {written['snapshot-id']}, {self.details['row_count']} rows written)"

    def _staged(self) -> str:
        """Where this try's version is written: the staging table, or this try's branch of the target."""
        if self.base_snapshot is None:
            return self.table.staging_table().quoted
        return f"{self.table.target.quoted}.{quote('branch_' + self.table.branch)}"

    def audit(self, report: PhaseReport) -> None:
        if self.adopted is None:
            super().audit(report)
            return
        record = self.adopted.record  # the same checks (the digest says so) passed on this very snapshot
        self.details["checks"] = list(record.checks)
        report.note = f"checks passed in try {record.prepared_by_try}: {record.checks_summary}"

    def audit_provenance(self) -> dict[str, str]:
        if self.adopted is None:
            return super().audit_provenance()
        summary = self.adopted.record.checks_summary
        return {markers.CHECKS: summary} if summary else {}

    def audit_target(self) -> AuditTarget:
        if self.base_snapshot is None:
            return AuditTarget(staged=self._staged(), published=None, columns=self.columns)
        target = self.table.target.quoted  # main: the current version
        if self.table.mode is not Mode.OVERWRITE_PARTITIONS:
            return AuditTarget(staged=self._staged(), published=target, columns=self.columns)
        # What this try wrote: the branch's rows in the partitions its snapshot added files to
        # (nothing before prepare, or when the query produced no rows).
        snapshot = self.details.get("snapshot_id")
        same = " AND ".join(
            f"{self._partition_value(entry, 'w')} <=> e.data_file.partition.{quote(self.partition_fields[entry])}"
            for entry in self.table.partition_by
        )
        staged = (
            f"(SELECT * FROM {target} VERSION AS OF {snapshot} AS w WHERE EXISTS (SELECT 1 FROM "
            f"{target}.entries VERSION AS OF {snapshot} AS e WHERE e.status = 1 AND e.snapshot_id = {snapshot} "
            f"AND {same}))"
            if snapshot is not None and snapshot != self.base_snapshot
            else f"(SELECT * FROM {target} WHERE false)"
        )
        return AuditTarget(
            staged=staged, published=target, columns=self.columns, replaced_partitions_of=self.table.partition_by,
            partition_value=self._partition_value,
        )  # fmt: skip

    def _partition_value(self, entry: str, alias: str) -> str:
        """A row's value under a partition field, computed by the catalog's own transform functions
        (``<catalog>.system.days(...)``), which give what the partition struct holds."""
        field = parse_field(entry)
        column = f"{alias}.{quote(field.column)}"
        if field.transform == "identity":
            return column
        function = f"{quote(self.table.target.catalog)}.system.{field.transform}"
        return f"{function}({column})" if field.width is None else f"{function}({field.width}, {column})"

    def _written_snapshot(self) -> dict[str, str]:
        catalog = self._catalog()
        staged_in = self.table.staging_table() if self.base_snapshot is None else self.table.target
        meta = catalog.current(staged_in)
        snapshot_id = None
        if meta is not None:
            snapshot_id = md.main_snapshot(meta) if self.base_snapshot is None else md.refs(meta).get(self.table.branch)
        if meta is None or snapshot_id is None:
            raise FencedError("this try's staged snapshot is gone: a newer try of this task instance took over")
        if snapshot_id == self.base_snapshot:  # a partition overwrite of no rows commits nothing
            return {"added-records": "0", "snapshot-id": str(snapshot_id)}
        return {**md.summary(meta, snapshot_id), "snapshot-id": str(snapshot_id)}

    def hold(self, report: PhaseReport) -> None:
        catalog, target = self._catalog(), self.table.target
        existing = catalog.load(target)
        if existing is None or self.base_snapshot is None:
            raise PublishError(f"{target} was dropped while this try ran; nothing is held")
        base = catalog.refresh(existing)
        self._still_ours(base)
        staged = int(self.details["snapshot_id"])
        if md.refs(base).get(self.table.branch) != staged:
            raise FencedError(f"branch {self.table.branch} no longer holds this try's snapshot {staged}")
        self.details["held"] = {
            "branch": self.table.branch,
            "snapshot_id": staged,
            "base_snapshot_id": self.base_snapshot,
            "checks": self.audit_provenance().get(markers.CHECKS),
        }
        report.touched.append(f"{target} (branch {self.table.branch} at snapshot {staged}, held for its publish group)")
        self.fault("after_hold")

    def commit(self, report: PhaseReport) -> None:
        self.fault("before_publish")
        if self.base_snapshot is None:
            self._publish_by_rename(report)
        else:
            self._publish_branch(report)
        if self.progress.published:
            self.progress.reached = Reached.COMMITTED
            self.fault("after_publish")

    def _publish_by_rename(self, report: PhaseReport) -> None:
        catalog, staging, target = self._catalog(), self.table.staging_table(), self.table.target
        table = catalog.load(staging)
        if table is None:
            raise FencedError(
                f"staging table {staging} of try {self.table.try_number} is gone: a newer try of this task "
                "instance has taken over, so this try must not publish"
            )

        def stamp(base: Any, builder: Any) -> Any:
            props = md.properties(base)
            if not markers.owned_by(props, self.table.txn_id) or markers.marker_try(props) != self.table.try_number:
                raise FencedError(f"{staging} does not carry try {self.table.try_number}'s markers; not publishing")
            return builder.setProperties(
                {
                    markers.PUBLISHED_AT: now_iso(),
                    markers.ROW_COUNT: str(self.details.get("row_count", "")),
                    **self.audit_provenance(),
                }
            )

        catalog.commit(table, stamp)  # carried over by the rename, as the session catalog's markers are
        try:
            catalog.rename(staging, target)
        except Exception as exc:
            if catalog.load(target) is None:
                if catalog.load(staging) is None:
                    raise FencedError(f"staging table {staging} was dropped by a newer try during the publish") from exc
                if md.java_class(exc).endswith("AlreadyExistsException"):
                    raise TargetExistsError(
                        f"{target} exists but is not an Iceberg table; it is left untouched"
                    ) from exc
                raise PublishError(f"could not rename {staging} to {target}: {first_line(exc)}") from exc
            self._lost_race(report)
            return
        self.progress.publish()
        self.details["publish"] = {"mechanism": "rename"}
        report.touched.append(f"{staging} -> {target} (renamed; no data moved)")

    def _lost_race(self, report: PhaseReport) -> None:
        catalog, target, staging = self._catalog(), self.table.target, self.table.staging_table()
        current = catalog.current(target)
        self._warn_if(catalog.drop(staging))
        report.touched.append(f"{staging} (dropped: {target} appeared)")
        props = md.properties(current) if current is not None else {}
        existing = catalog.load(target)
        schema, ours = self.schema, markers.owned_by(props, self.table.txn_id)
        if self.table.mode is Mode.OVERWRITE_PARTITIONS and existing is not None and schema is not None and not ours:
            # Another task instance created it first (a backfill's first dates): no earlier try of
            # this one wrote into it; this try's partitions go into it, staged as for any target.
            report.touched.append(self._create_branch(existing, schema))
            report.touched.append(self._write(f"commit {target}"))
            if self.checks:  # what is published is this second write: the checks see it
                self.audit(report)
            self._publish_branch(report)
            return
        after_lost_race(self.table, props, self.progress, self.details)

    def _publish_branch(self, report: PhaseReport) -> None:
        catalog, target, txn, try_number = self._catalog(), self.table.target, self.table.txn_id, self.table.try_number
        branch = self.table.branch
        existing = catalog.load(target)
        if existing is None:
            raise PublishError(f"{target} was dropped while this try ran; nothing was published")
        published_at = now_iso()
        provenance = {
            **try_markers(self.table, published_at),
            markers.PUBLISHED_AT: published_at,
            markers.ROW_COUNT: str(self.details.get("row_count", "")),
            **self.audit_provenance(),
        }
        partial = self.table.mode is Mode.OVERWRITE_PARTITIONS
        staged_nothing = partial and self.details.get("snapshot_id") == self.base_snapshot
        moved: list[int] = []

        def publish(base: Any, builder: Any) -> Any | None:
            self._still_ours(base)
            self.fault("publish_checked")  # tests: a newer try begins between this check and the commit
            staged = md.refs(base)[branch]
            moved.clear()
            if not staged_nothing and self._main_moved(base, staged):
                moved.append(staged)
                return None
            if not staged_nothing:
                builder = builder.setBranchSnapshot(staged, "main")
            # An earlier try's branch here was re-made by a zombie's late write: it goes too.
            builder = (
                _without_other_tries(base, builder, txn, try_number)
                .setRef(branch, catalog.branch_ref(staged, asserted=True))
                .removeRef(branch)
                .removeProperties(catalog.java_set(fence.keys_of(md.properties(base), txn)))
                .setProperties(provenance)
            )
            return catalog.with_comments(base, builder, self.table.comments) if self.table.comments else builder

        def landed(base: Any) -> bool:
            props = md.properties(base)
            return props.get(markers.PUBLISHED_AT) == published_at and markers.owned_by(props, txn)

        staged = self.details["snapshot_id"]
        for _ in range(REBASES):
            if self._commit_or_decide(existing, publish, landed, report) or not moved:
                break
            staged = rebase(catalog, existing, branch=branch, staged=moved[0], began_from=self.base_snapshot or 0,
                            still_ours=self._still_ours, summary=provenance)  # fmt: skip
            report.touched.append(f"{target} (branch {branch}: partitions re-applied on the moved main, {staged})")
            self.details["snapshot_id"] = staged
        else:
            raise PublishError(f"{target}'s main kept moving; {REBASES} re-applications did not catch up")
        self.progress.publish()
        self.details["publish"] = {"mechanism": "branch", "snapshot_id": self.details.get("snapshot_id")}
        if partial:
            self.details["publish"]["partitions"] = [] if staged_nothing else partition_names(existing, staged)
        report.touched.append(f"{target} (main -> snapshot {self.details.get('snapshot_id')} of branch {branch})")

    def _still_ours(self, base: Any) -> None:
        """Raises unless this try's fence is the newest on ``base`` and its branch is there."""
        try_number = self.table.try_number
        raised = fence.tries(md.properties(base), self.table.txn_id)
        if try_number not in raised or max(raised) != try_number or self.table.branch not in md.refs(base):
            newer = max(raised) if raised else None
            raise FencedError(
                f"try {newer if newer and newer != try_number else 'of another run'} of this task instance "
                f"took over {self.table.target}; try {try_number} must not publish"
            )

    def _commit_or_decide(
        self, existing: Any, change: Callable[[Any, Any], Any | None], landed: Callable[[Any], bool],
        report: PhaseReport,
    ) -> bool:  # fmt: skip
        """Commits ``change``; True when the catalog did not report the outcome and the table showed
        it had applied.

        Without an outcome, this try's branch is removed first, so that the request, should it still
        be in flight, can no longer apply (it requires the branch at its staged snapshot), and the
        table read once more decides."""
        catalog = self._catalog()
        try:
            catalog.commit(existing, change)
            return False
        except md.CommitUnknown as exc:
            unknown = exc
        try:
            if not landed(catalog.refresh(existing)):
                report.touched += self._drop_branches(up_to=self.table.try_number)
                if not landed(catalog.refresh(existing)):
                    raise PublishError(
                        f"the catalog did not confirm the publish and {self.table.target} does not show it: nothing "
                        "was published, this try's branch is removed"
                    ) from unknown
        except PublishError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the catalog says, the outcome is not known
            raise PublishError(
                f"the catalog did not confirm the publish of {self.table.target} and cannot be read now "
                f"({first_line(exc)}); the next try's begin removes this try's branch first, so the publish either "
                "shows in the table by then or never will"
            ) from unknown
        report.note = "the catalog did not confirm the publish; the table shows it, so it happened"
        return True

    def _main_moved(self, base: Any, staged: int) -> bool:
        """Whether ``main`` has moved past the snapshot this try's branch was staged on: an
        ``overwrite_partitions`` try then re-applies its partitions; a replace must not publish."""
        main = md.main_snapshot(base)
        partial = self.table.mode is Mode.OVERWRITE_PARTITIONS
        if md.parent_id(base, staged) == main and (partial or main == self.base_snapshot):
            return False
        if not partial:
            raise PublishError(
                f"{self.table.target} changed since this try began (main is snapshot {main}, was "
                f"{self.base_snapshot}): another writer committed; the next try builds on the new version"
            )
        return True

    def abort(self, report: PhaseReport) -> None:
        report.touched += self._clean_tries(up_to=self.table.try_number)
        self.progress.reached = Reached.ABORTED
        self.progress.outcome = Outcome.ABORTED

    # -- clean-up ----------------------------------------------------------------------------

    def _clean_tries(self, up_to: int) -> list[str]:
        return self._drop_staging(up_to) + self._drop_branches(up_to)

    def _drop_staging(self, up_to: int) -> list[str]:
        """Staging tables of tries ``<= up_to`` of this transaction, each checked for our markers."""
        catalog, touched = self._catalog(), []
        for try_number in range(1, up_to + 1):
            staging = self.table.staging_table(try_number)
            table = catalog.load(staging)
            if table is None:
                continue
            props = md.properties(table.operations().refresh())
            if markers.owned_by(props, self.table.txn_id) and markers.marker_try(props) == try_number:
                self._warn_if(catalog.drop(staging))
                touched.append(f"{staging} (dropped with its directory)")
            else:
                self.log.warning(f"{staging} does not carry this transaction's markers; left alone")
        return touched

    def _warn_if(self, problem: str | None) -> None:
        if problem is not None:
            self.log.warning(problem)

    def _drop_branches(self, up_to: int) -> list[str]:
        """Branches of tries ``<= up_to``, and the fence if it names one of them: one metadata swap."""
        catalog, txn = self._catalog(), self.table.txn_id
        existing = catalog.load(self.table.target)
        if existing is None:
            return []
        dropped: list[str] = []

        def drop(base: Any, builder: Any) -> Any | None:
            dropped[:] = [n for n in md.refs(base) if (t := branch_try(n, txn)) is not None and t <= up_to]
            stale = fence.keys_of(md.properties(base), txn, up_to=up_to)
            if not dropped and not stale:
                return None
            for name in dropped:
                builder = builder.removeRef(name)
            return builder.removeProperties(catalog.java_set(stale)) if stale else builder

        catalog.commit(existing, drop)
        return [f"{self.table.target} (branch {name} dropped)" for name in dropped]


def _require_group_target(catalog: IcebergCatalog, target: Any, existing: Any | None) -> None:
    """A publish group publishes its members in one multi-table commit, which a REST catalog offers
    and which updates existing tables only (a new table would need a rename of its own)."""
    if catalog.type != "rest":
        raise UnsupportedTargetError(
            f"publish groups need an Iceberg REST catalog (its multi-table commit); catalog {catalog.name!r} is "
            f"type={catalog.type}"
        )
    if existing is None:
        raise UnsupportedTargetError(
            f"{target} does not exist: a publish group replaces existing tables in one commit; create it once "
            "without publish_group"
        )


def _without_other_tries(base: Any, builder: Any, txn_id: str, try_number: int) -> Any:
    """``builder`` without the branches of this transaction's other tries."""
    for name in md.refs(base):
        other = branch_try(name, txn_id)
        if other is not None and other != try_number:
            builder = builder.removeRef(name)
    return builder


def _require_same_shape(
    target: str, metadata: Any, schema: StructType, partition_by: tuple[str, ...]
) -> dict[str, str]:
    """A replace writes a snapshot of the target's own schema and partitioning; Iceberg's schema is
    table-wide, so changing it would show the new shape to readers of the old version. Returns the
    table's partition fields (as ``partition_by`` spells them) with their names in the partition struct."""
    columns = [(str(f.name()).lower(), str(f.type())) for f in metadata.schema().columns()]
    if not same_columns(columns, schema):
        new = [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]
        raise UnsupportedTargetError(
            f"the query's columns {new} differ from {target}'s {columns}: a replace of an Iceberg table keeps its "
            "schema (readers of the current version would see a new schema); drop the table first or "
            "write under a new name"
        )
    fields = dict(md.partitioning(metadata))
    if partition_by and list(partition_by) != list(fields):
        raise UnsupportedTargetError(
            f"partition_by {list(partition_by)} differs from {target}'s partitioning {list(fields)}; a replace or "
            "overwrite_partitions keeps the table's partitioning"
        )
    return fields


# Iceberg accepts these into a wider column on write (type promotion).
_WIDENS = frozenset({("int", "long"), ("float", "double")})


def same_columns(current: list[tuple[str, str]], schema: StructType) -> bool:
    """Whether a query of ``schema`` can be written as a snapshot of a table whose columns are
    ``current`` (name, Iceberg type): the same names in the same order, each type equal or one
    Iceberg promotes on write. Nested types are left to Iceberg's own write check."""
    if [name for name, _ in current] != [f.name.lower() for f in schema.fields]:
        return False
    for (_, old), field in zip(current, schema.fields, strict=True):
        new, old = _iceberg_type(field.dataType), old.replace(" ", "")
        if new is not None and new != old and (new, old) not in _WIDENS:
            return False
    return True


def _iceberg_type(data_type: Any) -> str | None:
    """Iceberg's name for a Spark atomic type (``decimal(p,s)`` without Iceberg's space), or None."""
    names = {
        "bigint": "long",
        "int": "int",
        "smallint": "int",
        "tinyint": "int",
        "string": "string",
        "double": "double",
        "float": "float",
        "boolean": "boolean",
        "date": "date",
        "timestamp": "timestamptz",
        "timestamp_ntz": "timestamp",
        "binary": "binary",
    }
    simple = str(data_type.simpleString())
    if simple.startswith("decimal"):
        return simple.replace(" ", "")
    return names.get(simple)
