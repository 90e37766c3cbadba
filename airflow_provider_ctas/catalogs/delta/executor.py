"""The Delta strategy's phases, inside the Spark driver.

begin    checks the catalog, decides what the target allows and cleans up earlier tries' staging
         tables; for an existing target, from the second try on, records the previous try's
         version for the transaction's Delta application in an empty commit (fencing every earlier
         try); Delta skipping that commit means the previous try's write had landed;
prepare  a new target, or an existing one with ``checks=``: creates the staging table empty under
         the reserved name (``CREATE TABLE``, the ownership markers in its first commit, no data
         file; in begin when there are checks, so that they are analysed before any data is
         written), then appends the query's rows in a second commit; an existing target without
         checks: nothing yet (a Delta write and its commit are one step);
audit    the checks, on the staging table (and, for ``overwrite_partitions``, the result it makes);
commit   a new target: renames staging to it (one metastore call, fails if the target appeared; in
         ``overwrite_partitions`` a target that appeared meanwhile has its partitions overwritten);
         an existing one: one Delta commit (``CREATE OR REPLACE``, or a dynamic partition overwrite)
         of the query's rows, or of the checked staging table's (a second write: what was checked
         is what is published), carrying this try's version, which Delta skips or refuses once a
         newer try has begun; the staging table is then dropped;
abort    drops this and earlier tries' staging tables (their markers checked first, in the catalog
         or, where a killed try left no catalog entry, in the table's first logged commit).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.analysis import analyse_query, describe_schema
from airflow_provider_ctas.catalogs.audit import AuditTarget
from airflow_provider_ctas.catalogs.delta import log as delta_log
from airflow_provider_ctas.catalogs.delta.strategy import DELTA_CATALOG_CLASS
from airflow_provider_ctas.catalogs.delta.table import FORMAT, DeltaTable, write_version
from airflow_provider_ctas.catalogs.existing_target import after_lost_race, nothing_to_do
from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient, TableInfo, now_iso
from airflow_provider_ctas.catalogs.phase_executor import PhaseExecutor
from airflow_provider_ctas.catalogs.provenance import new_table_properties, try_markers
from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import (
    CorruptStateError,
    DatabaseNotFoundError,
    FencedError,
    InvalidInputError,
    PublishError,
    UnsupportedTargetError,
)
from airflow_provider_ctas.core.identifiers import TableRef, sql_string_literal
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.comments import read_comments, set_comments, with_column_comments
from airflow_provider_ctas.spark.ddl import create_table_sql
from airflow_provider_ctas.spark.engine import is_connect
from airflow_provider_ctas.spark.errors import error_condition, first_line
from airflow_provider_ctas.spark.protocol import PhaseReport, PhaseRequest, Reached
from airflow_provider_ctas.spark.runtime import require_runtime

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Reporter

EXTENSION_CLASS = "io.delta.sql.DeltaSparkSessionExtension"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
FENCE_OF = "airflow_ctas.fence_of"
"""In a fence commit's ``userMetadata``: the try whose version it records."""
FENCED_BY_DELTA = "ConcurrentTransactionException"
"""Delta's error when another commit recorded a version for the application this write read."""


def delta_conf_problem(catalog: str | None, extensions: str | None, where: str = "the operator's conf") -> str | None:
    """What is wrong with a session's Delta settings (the session catalog and the SQL extension), with the fix."""
    fix = (
        f"set spark.sql.catalog.spark_catalog={DELTA_CATALOG_CLASS} and spark.sql.extensions={EXTENSION_CLASS} "
        f"in {where}"
    )
    if catalog != DELTA_CATALOG_CLASS:
        return f"Spark's session catalog is {catalog or 'the built-in one'}, not Delta's: {fix}"
    if EXTENSION_CLASS not in (extensions or "").split(","):
        return f"Delta's SQL extension is not enabled: {fix}"
    return None


def check_delta_catalog(spark: SparkSession) -> None:
    """Refuse, with the fix, a session whose session catalog is not Delta's, or whose driver lacks
    the Delta runtime; before any catalog call (a missing catalog class fails at first use). Over
    Spark Connect these are the server's settings, and its classpath is out of a client's reach."""
    catalog = spark.conf.get("spark.sql.catalog.spark_catalog", None)
    if catalog == DELTA_CATALOG_CLASS and not is_connect(spark):
        require_runtime(
            spark, DELTA_CATALOG_CLASS, "Delta", "the jars delta-spark_<spark minor>_2.13 and delta-storage"
        )
    where = "the Spark Connect server's configuration" if is_connect(spark) else "the operator's conf"
    problem = delta_conf_problem(catalog, spark.conf.get("spark.sql.extensions", None), where)
    if problem is not None:
        raise InvalidInputError(problem)


class DeltaExecutor(PhaseExecutor[DeltaTable]):
    audits = True

    def __init__(self, spark: SparkSession, table: DeltaTable, request: PhaseRequest, log: Reporter) -> None:
        super().__init__(spark, table, request, log)
        self.catalog = CatalogClient(spark)
        self.replacing = False
        """True when the target exists and this try replaces it in place; else it stages a new table."""
        self.staging_created = False
        """The staging table was created in begin (for the checks to be analysed before any write)."""
        self.target_location: str | None = None
        self.schema: StructType | None = None
        self.comments = table.comments
        """What the published table's comments are: the request's, over a replaced table's own."""

    def clean_up_this_try(self) -> list[str]:
        return self._drop_staging(up_to=self.table.try_number)

    # -- phases ------------------------------------------------------------------------------

    def begin(self, report: PhaseReport) -> None:
        check_delta_catalog(self.spark)
        target = self.table.target
        self.details["metastore_uris"] = self.engine.metastore_uris()
        self.details["spark_application"] = self.engine.application()
        if not self.spark.catalog.databaseExists(target.database):
            raise DatabaseNotFoundError(f"database {target.database!r} does not exist; create it first")
        if self.table.try_number > 1:
            report.touched += self._drop_staging(up_to=self.table.try_number - 1)
        existing = self.catalog.table_info(target)
        self.began = True
        if existing is not None and nothing_to_do(
            self.table, existing.properties, self.progress, self.details, self.log
        ):
            report.note = f"outcome {self.outcome}; nothing staged"
            return
        schema = analyse_query(self.spark, self.request.sql, self.engine, self.log, self.details)
        missing = [c for c in self.table.partition_by if c not in {f.name.lower() for f in schema.fields}]
        if missing:
            raise InvalidInputError(f"partition_by names {missing}, which the query does not produce")
        self.table.comments.require_columns(f.name for f in schema.fields)
        describe_schema(schema, self.details)
        self.schema = schema
        if existing is not None:  # Delta's replace takes the comments its commit gives: the table's own go in
            self.comments = self.table.comments.over(read_comments(self.spark, target), (f.name for f in schema.fields))
        if existing is None:
            self.details["publish_mechanism"] = "rename"
        else:
            self._check_in_place(existing)
            report.touched.append(self._fence_earlier_tries())
            if self.progress.outcome is not None:
                return
        if self.checks:
            report.touched.append(self._create_staging(schema))
        elif existing is None:
            report.touched.append(f"nothing yet: {self.table.staging_table()} is written in prepare")
        self.progress.reached = Reached.BEGUN

    @property
    def stages(self) -> bool:
        """Whether this try writes a staging table: a new target, or an existing one with checks."""
        return not self.replacing or bool(self.checks)

    def _create_staging(self, schema: StructType) -> str:
        staging = self.table.staging_table()
        with self._user_metadata():
            # Empty first, so the markers are in the table's first commit: a write killed after it
            # leaves a table (or at least a log) that says which try made it.
            props = new_table_properties(self.table)
            self.spark.sql(
                create_table_sql(staging.quoted, schema, FORMAT, self.table.partition_by, props, comments=self.comments)
            )
        self.staging_created = True
        return f"{staging} (created, empty)"

    def audit_target(self) -> AuditTarget:
        columns = [f.name for f in self.schema.fields] if self.schema is not None else []
        staged, target = self.table.staging_table().quoted, self.table.target.quoted
        if not self.replacing:
            return AuditTarget(staged=staged, published=None, columns=columns)
        partial = self.table.partition_by if self.table.mode is Mode.OVERWRITE_PARTITIONS else ()
        return AuditTarget(staged=staged, published=target, columns=columns, replaced_partitions_of=partial)

    def _check_in_place(self, existing: TableInfo) -> None:
        """What an existing target must be for this try to write it in place."""
        target = self.table.target
        if existing.provider.lower() != FORMAT:
            raise UnsupportedTargetError(
                f"{target} is a {existing.provider or 'non-Delta'} table, not a Delta table; Delta's catalog would "
                "drop it and then create the new one (not atomic); drop it first or keep its table format"
            )
        if self.table.mode is Mode.OVERWRITE_PARTITIONS:
            current = [c.lower() for c in existing.partition_columns]
            if current != list(self.table.partition_by):
                raise UnsupportedTargetError(
                    f"partition_by {list(self.table.partition_by)} differs from {target}'s partitioning {current}; "
                    "overwrite_partitions keeps the table's partitioning"
                )
        self.replacing = True
        self.target_location = existing.location
        self.details["publish_mechanism"] = "delta_commit"

    def _fence_earlier_tries(self) -> str:
        """From the second try on (and unless the previous try is recorded as successful, a re-run),
        an empty commit that records the previous try's version for the transaction's application:
        no earlier try can commit after it. Delta skips it if that version is recorded already, which
        only the previous try's own write does: it landed, so this try has nothing to do."""
        target, previous = self.table.target, self.table.try_number - 1
        if previous == 0 or self.table.last_committed_try == previous:
            return "no earlier try to fence"
        empty = self.spark.table(target.quoted).limit(0)
        with self._user_metadata(fence=previous):
            self._fenced(lambda: self._with_app(empty.writeTo(target.quoted), write_version(previous)).append())
        if self._our_commit(target.quoted, fence=previous) is None:
            self.log.info(f"{target} was already published by try {previous} of this task instance")
            self.details["published_by_try"] = previous
            self.progress.outcome = Outcome.ALREADY_PUBLISHED
            return f"nothing: Delta skipped the fence, try {previous}'s write is recorded"
        return (
            f"{target} (tries up to {previous} fenced: Delta application {self.table.app_id} at version "
            f"{write_version(previous)}, an empty commit)"
        )

    def prepare(self, report: PhaseReport) -> None:
        if not self.stages:
            report.note = "a Delta write commits as it ends: the replace is written at commit, once the task decides"
            self.progress.reached = Reached.PREPARED
            self.fault("after_prepare")
            return
        staging, schema = self.table.staging_table(), self.schema
        if schema is None:
            raise CorruptStateError("prepare ran without begin's analysis of the query")
        self.fault("before_write")
        if not self.staging_created:
            self._create_staging(schema)
        with self.engine.progress(f"prepare {self.table.target}", self.log), self._user_metadata():
            # The append carries no application version: on a table nobody else writes it would only
            # cost Delta a state reconstruction (measured: +3 s); retries read the published table's
            # markers instead.
            self._query().writeTo(staging.quoted).append()
        commit = self._logged_commit(staging.quoted, self._managed_location(staging), version=1)
        if commit is None:
            raise PublishError(f"try {self.table.try_number}'s commit is not in {staging}'s history")
        report.touched.append(f"{staging} (written: {self._record_commit(commit)} rows)")
        self.progress.reached = Reached.PREPARED
        self.fault("after_prepare")

    def commit(self, report: PhaseReport) -> None:
        self.fault("before_publish")
        if self.replacing:
            self._publish_in_place(report)
        else:
            self._publish_by_rename(report)
        if self.progress.published:
            self.progress.reached = Reached.COMMITTED
            self.fault("after_publish")

    def _publish_in_place(self, report: PhaseReport) -> None:
        target = self.table.target
        if self.stages:
            self._require_own_staging()
        self.fault("before_write")
        published_at = now_iso()
        with self.engine.progress(f"commit {target}", self.log), self._user_metadata():
            if self.table.mode is Mode.OVERWRITE_PARTITIONS:
                writer = self._with_app(self._source().writeTo(target.quoted), write_version(self.table.try_number))
                self._fenced(writer.overwritePartitions)
            else:
                writer = self._writer(target.quoted, created_at=published_at)
                self._fenced(self._with_app(writer, write_version(self.table.try_number)).createOrReplace)
        commit = self._logged_commit(target.quoted, self.target_location)
        if commit is None:
            # Delta skips, without an error, a write whose version is not above the one recorded.
            raise FencedError(
                f"a newer try of this task instance raised the fence on {target}; Delta skipped try "
                f"{self.table.try_number}'s write"
            )
        self.progress.publish()
        rows = self._record_commit(commit)
        self.details["publish"] = {"mechanism": "delta_commit", "version": self.details["delta_version"]}
        what = "partitions overwritten" if self.table.mode is Mode.OVERWRITE_PARTITIONS else "replaced"
        report.touched.append(f"{target} ({what}: Delta version {self.details['delta_version']}, {rows} rows)")
        if self.table.mode is Mode.OVERWRITE_PARTITIONS and self.table.comments:
            self._set_comments(report)
        if self.stages:  # published: the checked staging table has served
            try:
                report.touched += self._drop_staging(up_to=self.table.try_number, first=self.table.try_number)
            except Exception as exc:  # noqa: BLE001 - published; the next try or GC drops it
                self.log.warning(f"{self.table.staging_table()} not dropped after the publish: {first_line(exc)}")

    def _set_comments(self, report: PhaseReport) -> None:
        """After a partition overwrite (which keeps the table's metadata): the comments it names."""
        target = self.table.target
        try:
            with self._user_metadata():
                changes = self.table.comments.changes_to(read_comments(self.spark, target))
                report.touched += [f"{target} ({what})" for what in set_comments(self.spark, target, changes)]
        except Exception as exc:  # noqa: BLE001 - published; the comments are not worth failing it
            self.details.setdefault("finalize_pending", []).append(f"set the comments: {first_line(exc)}")
            self.log.warning(f"published, but could not set {target}'s comments: {first_line(exc)}")

    def _require_own_staging(self) -> None:
        staging = self.table.staging_table()
        props = self.catalog.properties(staging)
        if (
            props is None
            or not markers.owned_by(props, self.table.txn_id)
            or (markers.marker_try(props) != self.table.try_number)
        ):
            raise FencedError(
                f"staging table {staging} of try {self.table.try_number} is gone: a newer try of this task "
                "instance has taken over, so this try must not publish"
            )

    def _publish_by_rename(self, report: PhaseReport) -> None:
        staging, target = self.table.staging_table(), self.table.target
        self._require_own_staging()
        if self.audit_results:  # carried over by the rename
            checks = sql_string_literal(self.audit_provenance()[markers.CHECKS])
            with self._user_metadata():
                self.spark.sql(f"ALTER TABLE {staging.quoted} SET TBLPROPERTIES ('{markers.CHECKS}' = {checks})")
        try:
            self.catalog.rename(staging, target)
        except Exception as exc:
            current = self.catalog.table_info(target)
            if current is None:
                if self.catalog.properties(staging) is None:
                    raise FencedError(f"staging table {staging} was dropped by a newer try during the publish") from exc
                raise PublishError(f"could not rename {staging} to {target}: {first_line(exc)}") from exc
            self._drop_staging(up_to=self.table.try_number, first=self.table.try_number)
            report.touched.append(f"{staging} (dropped: {target} appeared)")
            if self.table.mode is Mode.OVERWRITE_PARTITIONS and not markers.owned_by(
                current.properties, self.table.txn_id
            ):
                # Another task instance created the table first (a backfill's first dates): no earlier
                # try of this one wrote into it, so there is nothing to fence.
                self._check_in_place(current)
                self._publish_in_place(report)
                return
            after_lost_race(self.table, current.properties, self.progress, self.details)
            return
        self.progress.publish()
        self.details["publish"] = {"mechanism": "rename"}
        report.touched.append(f"{staging} -> {target} (renamed)")

    def abort(self, report: PhaseReport) -> None:
        report.touched += self._drop_staging(up_to=self.table.try_number)
        self.progress.reached = Reached.ABORTED
        self.progress.outcome = Outcome.ABORTED

    # -- Delta writes --------------------------------------------------------------------------

    def _query(self) -> DataFrame:
        return self.spark.sql(as_subquery(self.request.sql or ""))

    def _source(self) -> DataFrame:
        """What an in-place publish writes: the checked staging table's rows, or the query's."""
        return self.spark.table(self.table.staging_table().quoted) if self.stages else self._query()

    def _writer(self, name: str, *, created_at: str) -> Any:
        """A DataFrameWriterV2 that creates ``name`` from what this try publishes, with its markers
        (and the checks' summary), the user's table properties and partitioning."""
        from pyspark.sql.functions import col

        writer = with_column_comments(self._source(), self.comments).writeTo(name).using(FORMAT)
        described = {"comment": self.comments.table} if self.comments.table is not None else {}
        for key, value in {
            **new_table_properties(self.table, created_at),
            **self.audit_provenance(),
            **described,
        }.items():
            writer = writer.tableProperty(key, value)
        if self.table.partition_by:
            writer = writer.partitionedBy(*(col(c) for c in self.table.partition_by))
        return writer

    def _with_app(self, writer: Any, version: int) -> Any:
        return writer.option("txnAppId", self.table.app_id).option("txnVersion", str(version))

    @contextmanager
    def _user_metadata(self, fence: int | None = None) -> Iterator[None]:
        """The provenance in the commit's ``userMetadata`` (``DESCRIBE HISTORY``); a fence's commit
        also names the try it fences."""
        provenance = try_markers(self.table)
        if fence is not None:
            provenance[FENCE_OF] = str(fence)
        self.spark.conf.set(USER_METADATA, json.dumps(provenance, sort_keys=True))
        try:
            yield
        finally:
            self.spark.conf.unset(USER_METADATA)

    def _fenced(self, write: Callable[[], object]) -> None:
        try:
            write()
        except Exception as exc:
            if FENCED_BY_DELTA in str(exc) or error_condition(exc) == "DELTA_CONCURRENT_TRANSACTION":
                raise FencedError(
                    f"a newer try of this task instance raised the fence on {self.table.target} while try "
                    f"{self.table.try_number} was writing; Delta refused its commit"
                ) from exc
            if "Concurrent" in error_condition(exc) or "DELTA_CONCURRENT" in error_condition(exc):
                raise PublishError(
                    f"another writer committed to {self.table.target} meanwhile: {first_line(exc)}"
                ) from exc
            raise

    def _our_commit(self, name: str, fence: int | None = None) -> Mapping[str, Any] | None:
        """This try's commit (its write, or its fence of ``fence``) in ``name``'s recent history,
        found by its provenance, not by position: another commit may have followed it."""
        for row in self.spark.sql(f"DESCRIBE HISTORY {name} LIMIT 20").collect():
            if self._is_ours(row["userMetadata"], fence):
                return dict(row.asDict())
        return None

    def _logged_commit(self, name: str, location: str | None, version: int | None = None) -> Mapping[str, Any] | None:
        """This try's write when it is the newest commit in the log at ``location`` (``version``, or
        the highest one listed), read from the log; the history when another commit followed it or
        the log is elsewhere."""
        fs = self.catalog.fs
        if location is not None and version is None:
            version = delta_log.latest_version(fs, location)
        info = delta_log.commit_info(fs, location, version) if location is not None and version is not None else None
        if info is not None and self._is_ours(info.get("userMetadata"), None):
            return {**info, "version": version}
        return self._our_commit(name)

    def _managed_location(self, table: TableRef) -> str:
        """Where Delta's catalog puts a managed table: its database's location, plus its name."""
        return f"{self.catalog.db_location(table.database)}/{table.table}"

    def _is_ours(self, user_metadata: str | None, fence: int | None) -> bool:
        """Whether a commit's ``userMetadata`` names this try (and, for a fence, the try it fences)."""
        try:
            provenance = json.loads(user_metadata or "{}")
        except ValueError:
            return False
        return bool(
            provenance.get(markers.TXN_ID) == self.table.txn_id
            and provenance.get(markers.TRY_NUMBER) == str(self.table.try_number)
            and provenance.get(FENCE_OF) == (None if fence is None else str(fence))
        )

    def _record_commit(self, commit: Mapping[str, Any]) -> int:
        """The row count of this try's commit; its Delta version goes into the details."""
        self.details["delta_version"] = int(commit["version"])
        self.details["row_count"] = int((commit.get("operationMetrics") or {}).get("numOutputRows", 0))
        return int(self.details["row_count"])

    # -- clean-up ------------------------------------------------------------------------------

    def _drop_staging(self, up_to: int, first: int = 1) -> list[str]:
        """Staging tables of tries ``first..up_to`` of this transaction, each checked for our markers;
        where there is no table, the directory of one killed between its first Delta commit and its
        catalog entry, if that commit's markers name the try, or an empty one."""
        touched = []
        for try_number in range(first, up_to + 1):
            staging = self.table.staging_table(try_number)
            props = self.catalog.properties(staging) if self.spark.catalog.tableExists(staging.quoted) else None
            if props is None:
                leftover = self._managed_location(staging)
                logged = delta_log.created_properties(self.catalog.fs, leftover)
                if logged is not None and ownership.is_staging_of(logged, self.table.txn_id, try_number):
                    self.catalog.fs.delete(leftover)
                    touched.append(f"{leftover} (deleted: try {try_number}'s staging log, without its table)")
                elif self.catalog.fs.exists(leftover) and not self.catalog.fs.has_files(leftover):
                    self.catalog.fs.delete(leftover)
                    touched.append(f"{leftover} (deleted: empty)")
                elif self.catalog.fs.exists(leftover):
                    self.log.warning(f"{leftover} has no Delta log of try {try_number}'s staging table; left alone")
            elif ownership.is_staging_of(props, self.table.txn_id, try_number):
                # No PURGE: Delta's catalog refuses it; dropping a managed Delta table deletes its files.
                self.spark.sql(f"DROP TABLE IF EXISTS {staging.quoted}")
                touched.append(f"{staging} (dropped)")
            else:
                self.log.warning(f"{staging} does not carry this transaction's markers; left alone")
        return touched
