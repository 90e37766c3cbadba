"""The phases of the session-catalog strategy, run inside the Spark driver.

begin    analyse the SELECT, clean up what earlier tries left, decide what the target allows and how
         to publish, and create this try's staging table (empty, with markers); no Spark job runs.
prepare  ``INSERT INTO staging BY NAME <select>``: the only data written.
commit   publish in one metadata operation, then record provenance and remove what was superseded:
           rename  the target does not exist: ``ALTER TABLE staging RENAME TO target``;
           flip    replace with the same shape: ``ALTER TABLE target SET LOCATION <staging dir>``
                   (staging is an external table over a marked directory; the old directory is never
                   moved while readers may use it, and is deleted afterwards only if we created it);
           swap    replace with a new shape, only with ``allow_swap``: target -> backup, staging ->
                   target. Between the two renames readers can find the table missing or, for a
                   lookup that raced the first rename, empty: the documented window.
           partitions  overwrite_partitions: partitions new to the target are added in one
                   ``ALTER TABLE target ADD PARTITION ... LOCATION ...`` (one metastore call, all or
                   nothing), existing ones are pointed at their new locations in one more
                   (alter_partitions; over Spark Connect one ``SET LOCATION`` each, as SQL has no
                   batch form).
abort    drop staging of this and earlier tries, restore a target that a crashed swap had moved
         aside, and delete orphan staging directories whose marker file names this transaction.

Every drop is preceded by an ownership check on markers. Statements reach Spark with every name
quoted and every value a string literal; the user's SQL is only ever used as a subquery, so a DDL
or multi-statement text cannot run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas import __version__
from airflow_provider_ctas.catalogs.session_catalog.catalog import (
    CatalogClient,
    TableInfo,
    error_condition,
    first_line,
    now_iso,
)
from airflow_provider_ctas.catalogs.session_catalog.table import Mode, SessionCatalogTable
from airflow_provider_ctas.core import faults, markers
from airflow_provider_ctas.core.errors import (
    CtasError,
    DatabaseNotFoundError,
    FencedError,
    InvalidInputError,
    LeftoverError,
    PublishError,
    QueryError,
    TargetExistsError,
    UnsupportedTargetError,
)
from airflow_provider_ctas.core.identifiers import TableRef, quote, sql_string_literal
from airflow_provider_ctas.core.transaction import Outcome
from airflow_provider_ctas.spark.ddl import columns_ddl
from airflow_provider_ctas.spark.engine import Reporter
from airflow_provider_ctas.spark.protocol import PhaseReport, PhaseRequest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SOURCE_ALIAS = "__ctas_source"


class Publish(StrEnum):
    RENAME = "rename"
    FLIP = "flip"
    SWAP = "swap"
    PARTITIONS = "partitions"


# Staging that publishing hands over to the target by location lives in an external table, so that
# dropping the staging metadata never deletes the data the target now reads.
EXTERNAL_STAGING = (Publish.FLIP, Publish.PARTITIONS)


def clean_sql(sql: str) -> str:
    """Strip the trailing semicolons and whitespace a .sql file usually ends with."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    if not text:
        raise InvalidInputError("sql is empty")
    return text


def as_subquery(sql: str) -> str:
    # The newline before ')' keeps a trailing line comment in the user's SQL from swallowing it.
    return f"SELECT * FROM (\n{clean_sql(sql)}\n) AS {SOURCE_ALIAS}"


class SessionCatalogExecutor:
    def __init__(self, spark: SparkSession, table: SessionCatalogTable, request: PhaseRequest, log: Reporter) -> None:
        self.spark = spark
        self.table = table
        self.request = request
        self.log = log
        self.catalog = CatalogClient(spark, scratch_database=table.target.database)
        self.outcome: Outcome | None = None
        self.reached = "new"
        self.published = False
        self.skip_rest = False
        self.details: dict[str, Any] = {}
        self.mechanism = Publish.RENAME
        self._schema: StructType | None = None
        self._retained: dict[str, markers.Retained] = {}

    # -- helpers -------------------------------------------------------------------------------

    def _describe_owner(self, info: TableInfo) -> str:
        props = info.properties
        if markers.DAG_ID not in props:
            return "a table not created by airflow-provider-ctas"
        return (
            f"airflow-provider-ctas in dag {props.get(markers.DAG_ID)!r}, task {props.get(markers.TASK_ID)!r}, "
            f"run {props.get(markers.RUN_ID)!r} (try {props.get(markers.TRY_NUMBER)})"
        )

    def _fault(self, point: str) -> None:
        faults.inject(self.request.faults, point, self.table.try_number, self.log.info)

    # -- begin ---------------------------------------------------------------------------------

    def begin(self, report: PhaseReport) -> None:
        target = self.table.target
        if not self.spark.catalog.databaseExists(target.database):
            raise DatabaseNotFoundError(
                f"database {target.database!r} does not exist in Spark's session catalog; create it first"
            )
        # Everything of this transaction up to and including this try is a leftover here: earlier
        # tries, or an earlier attempt of this very try that a cluster manager relaunched. Their
        # directories are deleted only after this try publishes or aborts (see _finish_cleanup).
        report.touched += self.clean_tries(up_to=self.table.try_number, delete_dirs=False)
        info = self.catalog.table_info(target) or self._require_free_location()
        if info is not None:
            self._decide_on_existing_target(info)
            if self.skip_rest:
                report.note = f"outcome {self.outcome}; no staging created"
                return
        schema = self._analyse()
        self.mechanism = self._choose_mechanism(info, schema)
        self.details["publish_mechanism"] = self.mechanism.value
        report.touched.append(self._create_staging(schema))
        self.reached = "begun"
        self._fault("after_begin")

    def published_try(self, info: TableInfo) -> int | None:
        """The try of this transaction that published ``info``, or None.

        A flipped table's data directory (reserved name, marker file) is the authority: the flip
        that put it there is atomic, while the properties are copied afterwards and can lag.
        A renamed-in table got its properties atomically with the rename.
        """
        location = (info.location or "").rstrip("/")
        if markers.parse_reserved_name(location.rsplit("/", 1)[-1]):
            marker = self.catalog.read_marker(location)
            return marker.try_number if marker and marker.txn_id == self.table.txn_id else None
        if markers.owned_by(info.properties, self.table.txn_id):
            return markers.marker_try(info.properties)
        return None

    def _decide_on_existing_target(self, info: TableInfo) -> None:
        target, mode = self.table.target, self.table.mode
        if info.table_type == "VIEW":
            raise UnsupportedTargetError(f"{target} is a view; this provider only creates and replaces tables")
        if mode is Mode.OVERWRITE_PARTITIONS:
            return  # every run (re)writes its partitions; the shape is checked once the query is analysed
        published_try = self.published_try(info)
        if published_try is not None:
            self.details["published_by_try"] = published_try
            if mode is Mode.REPLACE and published_try == self.table.last_committed_try:
                self.log.info(
                    f"{target} was published by try {published_try} of this task instance, which Airflow "
                    "recorded as successful: this is a re-run, replacing it"
                )
                return
            self.outcome = Outcome.ALREADY_PUBLISHED
            self.skip_rest = True
            self.log.info(
                f"{target} was already published by try {published_try} of this task instance; nothing to run"
            )
            return
        if mode is Mode.CREATE:
            raise TargetExistsError(
                f"{target} already exists, created by {self._describe_owner(info)}; mode 'create' "
                "does not touch it (use 'replace' to replace it or 'create_if_not_exists' to skip)"
            )
        if mode is Mode.CREATE_IF_NOT_EXISTS:
            self.outcome = Outcome.TARGET_EXISTS
            self.skip_rest = True
            self.log.info(f"{target} exists ({self._describe_owner(info)}); create_if_not_exists: nothing to do")
            return
        if info.table_type != "MANAGED":
            raise UnsupportedTargetError(
                f"{target} is an {info.table_type or 'unknown'} table with data at {info.location}; replace "
                "only replaces managed tables, whose data the metastore owns"
            )

    def _require_free_location(self) -> TableInfo | None:
        """The target does not exist: its directory must not either. Returns the target when it turns
        out to be in the middle of being created by a concurrent run of this provider.

        A plain CTAS that crashed leaves the target's directory behind and blocks the rename. A
        concurrent run's rename shows the same way for a moment: the metastore moves the directory
        before it commits the rename (seen in parallel backfills' first runs).
        """
        location = f"{self.catalog.db_location(self.table.target.database)}/{self.table.target.table}"
        if not self.catalog.fs.exists(location):
            return None
        marker = self.catalog.read_marker(location)
        if marker is not None and marker.txn_id == self.table.txn_id:
            self.catalog.fs.delete(location)
            self.log.info(f"deleted {location}, left by an earlier try of this transaction")
            return None
        if marker is not None and marker.target == self.table.target.qualified:
            self._fault("concurrent_creator")
            if self._target_appeared():
                self.log.info(f"{self.table.target} was being created by a concurrent run; it exists now")
                return self.catalog.table_info(self.table.target)
            raise PublishError(
                f"{location} holds data that transaction {marker.txn_id} of this provider is publishing as "
                f"{self.table.target}, but no table is registered there yet; the next try looks again"
            )
        raise LeftoverError(
            f"{self.table.target} does not exist but its directory {location} does (left by a crashed "
            "non-atomic CREATE TABLE AS SELECT?); it has no marker of this provider, so it is left alone: "
            "remove it, then retry"
        )

    def _analyse(self) -> StructType:
        from pyspark.errors import AnalysisException, ParseException
        from pyspark.sql.types import StructType

        if self.request.sql is None:
            raise InvalidInputError("no SQL was sent for this transaction")
        try:
            schema = self.spark.sql(as_subquery(self.request.sql)).schema
        except (ParseException, AnalysisException) as exc:
            raise QueryError(f"the SELECT is not a valid query: {first_line(exc)}") from exc
        names = [f.name for f in schema.fields]
        lowered = [n.lower() for n in names]
        duplicates = sorted({n for n in lowered if lowered.count(n) > 1})
        if duplicates:
            raise QueryError(f"the SELECT produces duplicate column names: {', '.join(duplicates)}")
        missing = [c for c in self.table.partition_by if c not in lowered]
        if missing:
            raise QueryError(
                f"partition_by column(s) {', '.join(missing)} are not produced by the SELECT, which "
                f"produces: {', '.join(names)}"
            )
        if len(self.table.partition_by) == len(names):
            raise QueryError("every column is a partition column; a table needs at least one data column")
        # The table's column order: data columns, then partition columns (as Spark's own CTAS does).
        by_name = {f.name.lower(): f for f in schema.fields}
        partition_set = set(self.table.partition_by)
        ordered = StructType(
            [f for f in schema.fields if f.name.lower() not in partition_set]
            + [by_name[c] for c in self.table.partition_by]
        )
        self.details["columns"] = [f.name for f in ordered.fields]
        self.details["schema"] = [{"name": f.name, "type": f.dataType.simpleString()} for f in ordered.fields]
        self._schema = ordered
        return ordered

    def shape_differences(self, info: TableInfo, schema: StructType) -> list[str]:
        """Why a location flip cannot turn ``info`` into the new version (empty when it can)."""
        problems = []
        if info.provider.lower() != self.table.table_format:
            problems.append(f"its format is {info.provider or 'unknown'}, the new version is {self.table.table_format}")
        if info.partition_columns or self.table.partition_by:
            problems.append("it is or would be partitioned, and a flip moves only the table's own location")
        if info.bucketed:
            problems.append("it is bucketed")
        old = [f"{name} {data_type}" for name, data_type in info.columns]
        new = [f"{f.name} {f.dataType.simpleString()}" for f in schema.fields]
        if old != new:
            problems.append(f"its columns are ({', '.join(old)}), the new version has ({', '.join(new)})")
        return problems

    def schema_drift(self, info: TableInfo, schema: StructType) -> list[str]:
        """How the query's result differs from an existing partitioned table (empty: it fits)."""
        problems = []
        if info.provider.lower() != self.table.table_format:
            problems.append(f"the table's format is {info.provider}, not {self.table.table_format}")
        if [c.lower() for c in info.partition_columns] != list(self.table.partition_by):
            problems.append(
                f"the table is partitioned by ({', '.join(info.partition_columns) or 'nothing'}), "
                f"not ({', '.join(self.table.partition_by)})"
            )
        old = {name.lower(): data_type for name, data_type in info.columns}
        new = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
        if missing := sorted(set(old) - set(new)):
            problems.append(f"the query does not produce column(s) {', '.join(missing)}")
        if extra := sorted(set(new) - set(old)):
            problems.append(f"the query produces column(s) {', '.join(extra)} the table does not have")
        changed = [f"{n} {old[n]} -> {new[n]}" for n in sorted(set(old) & set(new)) if old[n] != new[n]]
        if changed:
            problems.append(f"column type(s) differ: {', '.join(changed)}")
        return problems

    def _choose_mechanism(self, info: TableInfo | None, schema: StructType) -> Publish:
        if info is None:
            return Publish.RENAME
        if self.table.mode is Mode.OVERWRITE_PARTITIONS:
            if drift := self.schema_drift(info, schema):
                raise QueryError(
                    f"the query does not fit {info.ref} (schema drift, nothing was written): {'; '.join(drift)}"
                )
            return Publish.PARTITIONS
        problems = self.shape_differences(info, schema)
        if not problems:
            return Publish.FLIP
        if self.table.allow_swap:
            self.log.warning(
                f"{info.ref} will be swapped ({'; '.join(problems)}): readers may find it missing or empty "
                "for the moment between two renames (allow_swap=True)"
            )
            return Publish.SWAP
        raise UnsupportedTargetError(
            f"replace cannot publish {info.ref} in one metadata step: {'; '.join(problems)}. Spark's session "
            "catalog can only swap such a table with two renames, between which readers may find it missing "
            "or empty; set allow_swap=True to accept that, or keep the table's shape"
        )

    def _create_staging(self, schema: StructType) -> str:
        staging = self.table.staging_table()
        properties = {
            **self.table.table_properties,
            **self.table.marker_properties(created_at=now_iso(), provider_version=__version__),
        }
        marker = markers.MarkerFile(
            self.table.txn_id,
            self.table.try_number,
            self.table.target.qualified,
            now_iso(),
            self.table.key.to_dict(),
        ).to_json()
        partitions = [quote(c) for c in self.table.partition_by]
        clauses = [
            f"CREATE TABLE {staging.quoted} ({columns_ddl(schema)})",
            f"USING {self.table.table_format}",
        ]
        if partitions:
            clauses.append(f"PARTITIONED BY ({', '.join(partitions)})")
        if self.mechanism in EXTERNAL_STAGING:
            # External over a directory that carries its marker before the table exists: the
            # publish hands this directory to the target, and dropping staging must not delete it.
            location = f"{self.catalog.db_location(self.table.target.database)}/{staging.table}"
            self.catalog.fs.write_text(f"{location}/{markers.MARKER_FILE}", marker)
            clauses.append(f"LOCATION {sql_string_literal(location)}")
        assignments = ", ".join(f"{sql_string_literal(k)}={sql_string_literal(v)}" for k, v in properties.items())
        clauses.append(f"TBLPROPERTIES ({assignments})")
        self.catalog.sql("\n".join(clauses))
        info = self.catalog.table_info(staging)
        if info is None or not info.location:
            raise PublishError(f"staging table {staging} vanished right after it was created")
        if self.mechanism not in EXTERNAL_STAGING:
            self.catalog.fs.write_text(f"{info.location.rstrip('/')}/{markers.MARKER_FILE}", marker)
        self.details["staging_table"] = staging.qualified
        self.details["staging_location"] = info.location
        kind = "external" if self.mechanism in EXTERNAL_STAGING else "managed"
        return f"{staging} (created, empty, {kind}, for a {self.mechanism.value})"

    # -- prepare -------------------------------------------------------------------------------

    def prepare(self, report: PhaseReport) -> None:
        if self.request.sql is None:
            raise InvalidInputError("no SQL was sent for this transaction")
        staging = self.table.staging_table()
        with self.catalog.engine.progress(f"prepare {self.table.target}", self.log):
            result = self.spark.sql(f"INSERT INTO {staging.quoted} BY NAME {as_subquery(self.request.sql)}")
        metrics = self._write_metrics(result)
        if "row_count" not in metrics:
            metrics["row_count"] = int(self.spark.table(staging.qualified).count())
        self.details.update(metrics)
        report.touched.append(f"{staging} ({metrics['row_count']} rows written)")
        self.reached = "prepared"
        self._fault("after_prepare")

    def _write_metrics(self, result: DataFrame) -> dict[str, int]:
        try:
            return self.catalog.engine.write_metrics(result)
        except Exception as exc:
            self.log.warning(f"could not read write metrics ({first_line(exc)}); counting rows instead")
            return {}

    # -- commit --------------------------------------------------------------------------------

    def commit(self, report: PhaseReport) -> None:
        staging = self.table.staging_table()
        staged = self._own_staging()
        if staged is None:
            raise FencedError(
                f"staging table {staging} of try {self.table.try_number} is gone: a newer try of this task "
                "instance has taken over, so this try must not publish"
            )
        self._fault("before_publish")
        provenance = {markers.PUBLISHED_AT: now_iso()}
        if "row_count" in self.details:
            provenance[markers.ROW_COUNT] = str(self.details["row_count"])
        target_info = self.catalog.table_info(self.table.target)
        if self.mechanism is Publish.FLIP:
            self._publish_by_flip(target_info, staged, provenance, report)
        elif self.mechanism is Publish.PARTITIONS:
            self._publish_partitions(target_info, staged, report)
        else:
            self.catalog.set_properties(staging, provenance)
            if self.mechanism is Publish.SWAP and target_info is not None:
                self._publish_by_swap(target_info, report)
            else:
                self._publish_by_rename(report)
        if self.published:
            self.reached = "committed"
            self._fault("after_publish")
            self._record_publish(provenance[markers.PUBLISHED_AT])
            report.touched += self._finish_cleanup()

    def _own_staging(self) -> TableInfo | None:
        staged = self.catalog.table_info(self.table.staging_table())
        return staged if staged is not None and self._this_try(staged.properties) else None

    def _still_own_staging(self) -> bool:
        """The fence re-check right after a publish, which undoes the publish when it fails: one
        catalog call (properties only), as over Spark Connect each call is a round trip."""
        properties = self.catalog.properties(self.table.staging_table())
        return properties is not None and self._this_try(properties)

    def _this_try(self, properties: dict[str, str]) -> bool:
        return (
            markers.owned_by(properties, self.table.txn_id) and markers.marker_try(properties) == self.table.try_number
        )

    def _record_publish(self, published_at: str) -> None:
        try:
            info = self.catalog.table_info(self.table.target)
            if info is not None and info.location:
                self.details["location"] = info.location
            root = (
                self.details.get("staging_location")
                if self.mechanism is Publish.PARTITIONS
                else self.details.get("location")
            )
            if root:
                self.catalog.mark_published(root, self.table.txn_id, published_at, tuple(self._retained.values()))
        except Exception as exc:
            self.details.setdefault("finalize_pending", []).append(f"marker update: {first_line(exc)}")

    def _finish_cleanup(self) -> list[str]:
        """After a publish, whatever older tries left (directories deferred by begin) can go."""
        try:
            return self.clean_tries(up_to=self.table.try_number - 1, delete_dirs=True)
        except Exception as exc:
            self.details.setdefault("finalize_pending", []).append(f"older tries' staging: {first_line(exc)}")
            self.log.warning(f"published, but could not remove older tries' leftovers: {first_line(exc)}")
            return []

    def _publish_by_rename(self, report: PhaseReport) -> None:
        staging, target = self.table.staging_table(), self.table.target
        started = time.monotonic()
        try:
            self.catalog.rename(staging, target)
        except Exception as exc:
            # A concurrent creator that wins the rename shows up as TABLE_OR_VIEW_ALREADY_EXISTS, as
            # LOCATION_ALREADY_EXISTS (its directory moved, its metastore commit not yet visible) or as
            # the metastore's own "new table ... already exists": all three are a lost race once the
            # target is there.
            if self._target_appeared():
                self._lost_race(report)
                return
            if error_condition(exc).startswith("LOCATION_ALREADY_EXISTS"):
                location = f"{self.catalog.db_location(target.database)}/{target.table}"
                if self.catalog.read_marker(location) is None:
                    raise LeftoverError(
                        f"{target}'s directory appeared while this task ran and blocks the publish: {first_line(exc)}"
                    ) from exc
            raise PublishError(f"could not rename {staging} to {target}: {first_line(exc)}") from exc
        seconds = time.monotonic() - started
        self.published = True
        self.outcome = Outcome.PUBLISHED
        self.details["publish"] = {"mechanism": Publish.RENAME.value, "seconds": round(seconds, 3)}
        report.touched.append(f"{staging} -> {target} (renamed in {seconds:.3f}s)")

    def _target_appeared(self, wait_seconds: float = 10.0) -> bool:
        """Whether the target exists, waiting briefly for a concurrent rename's metastore commit."""
        deadline = time.monotonic() + wait_seconds
        while self.catalog.table_info(self.table.target) is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)
        return True

    def _lost_race(self, report: PhaseReport) -> None:
        """The target appeared between begin and publish: somebody else won."""
        info = self.catalog.table_info(self.table.target)
        self.catalog.drop(self.table.staging_table())
        report.touched.append(f"{self.table.staging_table()} (dropped: target already exists)")
        if info is not None and self.published_try(info) is not None:
            self.outcome = Outcome.ALREADY_PUBLISHED
            self.details["published_by_try"] = self.published_try(info)
            return
        if self.table.mode is Mode.CREATE_IF_NOT_EXISTS:
            self.outcome = Outcome.TARGET_EXISTS
            return
        if self.table.mode is Mode.OVERWRITE_PARTITIONS:
            raise PublishError(
                f"{self.table.target} was created by a concurrent run while this one was creating it; the next "
                "try overwrites its partitions in the table that now exists"
            )
        owner = self._describe_owner(info) if info else "another writer"
        raise TargetExistsError(
            f"{self.table.target} was created by {owner} while this task ran; that table is left untouched"
        )

    def _publish_by_flip(
        self,
        target_info: TableInfo | None,
        staged: TableInfo,
        provenance: dict[str, str],
        report: PhaseReport,
    ) -> None:
        target = self.table.target
        if target_info is None:
            raise PublishError(f"{target} disappeared since begin; the next try will create it")
        assert self._schema is not None
        problems = self.shape_differences(target_info, self._schema)
        if problems or target_info.table_type != "MANAGED":
            raise PublishError(f"{target} changed since begin ({'; '.join(problems) or target_info.table_type})")
        old_location, new_location = target_info.location or "", staged.location or ""
        started = time.monotonic()
        self.catalog.sql(f"ALTER TABLE {target.quoted} SET LOCATION {sql_string_literal(new_location)}")
        flipped = time.monotonic()
        if not self._still_own_staging():
            # A newer try revoked this one between the fence check and the flip: undo it.
            self.catalog.sql(f"ALTER TABLE {target.quoted} SET LOCATION {sql_string_literal(old_location)}")
            raise FencedError(f"a newer try took over while try {self.table.try_number} published; undone")
        self.published = True
        self.outcome = Outcome.PUBLISHED
        self.details["publish"] = {
            "mechanism": Publish.FLIP.value,
            "seconds": round(flipped - started, 3),
            "previous_location": old_location,
            "location": new_location,
        }
        report.touched.append(f"{target} location {old_location} -> {new_location} ({flipped - started:.3f}s)")
        self._after_flip(old_location, new_location, provenance, report)

    def _after_flip(
        self, old_location: str, new_location: str, provenance: dict[str, str], report: PhaseReport
    ) -> None:
        """Provenance, staging metadata and superseded data; the publish has happened already."""
        staging = self.table.staging_table()
        properties = {
            **self.table.table_properties,
            **self.table.marker_properties(created_at=now_iso(), provider_version=__version__),
            **provenance,
        }
        steps: list[tuple[str, Callable[[], None]]] = [
            ("record provenance", lambda: self._stamp_if_still_ours(new_location, properties)),
            ("drop the staging metadata", lambda: self.catalog.drop(staging)),
            (
                "remove the superseded version",
                lambda: report.touched.extend(self._remove_superseded(old_location, new_location)),
            ),
        ]
        for label, step in steps:
            try:
                step()
            except Exception as exc:
                self.details.setdefault("finalize_pending", []).append(f"{label}: {first_line(exc)}")
                self.log.warning(f"published, but could not {label}: {first_line(exc)}")

    def _stamp_if_still_ours(self, location: str, properties: dict[str, str]) -> None:
        """Copy provenance to the target unless a concurrent replace has flipped it since."""
        current = self.catalog.table_info(self.table.target)
        if current is None or (current.location or "").rstrip("/") != location.rstrip("/"):
            self.log.warning(f"{self.table.target} was replaced again meanwhile; not stamping its properties")
            return
        self.catalog.set_properties(self.table.target, properties)

    def _remove_superseded(self, old_location: str, new_location: str) -> list[str]:
        if not old_location or old_location.rstrip("/") == new_location.rstrip("/"):
            return []
        if self.catalog.read_marker(old_location) is None:
            self.details["superseded_kept"] = old_location
            self.log.warning(
                f"the previous version's data at {old_location} was not created by this provider, so it is "
                "left in place; no table points at it any more, delete it once no reader needs it"
            )
            return []
        return [*self._sweep(old_location, depth=0), self._retire(old_location)]

    # -- superseded versions: kept for readers, then deleted -------------------------------------

    def _retire(self, path: str) -> str:
        """Keep a version that was just superseded for the retention (readers that listed its files
        before the switch keep reading them), or delete it at once when the retention is 0."""
        seconds = self.table.superseded_retention_seconds
        if seconds <= 0:
            self.catalog.fs.delete(path)
            return f"{path} (superseded version deleted)"
        now = datetime.now(UTC)
        record = markers.SupersededRecord(
            target=self.table.target.qualified,
            superseded_at=now.isoformat(),
            delete_after=(now + timedelta(seconds=seconds)).isoformat(),
            superseded_by=markers.superseded_by_value(self.table.txn_id, self.table.try_number),
        )
        self.catalog.fs.write_text(f"{path.rstrip('/')}/{markers.SUPERSEDED_FILE}", record.to_json())
        self._retained[path] = markers.Retained(path, record.delete_after)
        return f"{path} (superseded version kept for readers until {record.delete_after})"

    def _sweep(self, root: str, depth: int) -> list[str]:
        """Delete what ``root``'s own publish kept for readers once its time is up; what is still
        within its time is handed on to this publish's marker, so the next one finds it."""
        marker = self.catalog.read_marker(root)
        touched: list[str] = []
        now = datetime.now(UTC)
        for entry in marker.retained if marker else ():
            due = markers.parse_time(entry.delete_after)
            if due is None or due > now:  # an unreadable time is kept, never taken as passed
                self._retained.setdefault(entry.path, entry)
                continue
            # Only a directory this provider retired (its record says so) is ever deleted.
            if markers.SupersededRecord.parse(self.catalog.fs.read_text(f"{entry.path}/{markers.SUPERSEDED_FILE}")):
                self.catalog.fs.delete(entry.path)
                touched.append(f"{entry.path} (superseded version deleted: its retention ended)")
                touched += self._delete_if_empty(entry.path.rstrip("/").rsplit("/", depth)[0] if depth else "")
        return touched

    def _delete_if_empty(self, root: str) -> list[str]:
        """A run's data root whose partitions were all superseded and deleted holds only its marker."""
        if not root or not markers.parse_reserved_name(root.rsplit("/", 1)[-1]):
            return []
        leftover = set(self.catalog.fs.list_names(root)) - {markers.MARKER_FILE, f".{markers.MARKER_FILE}.crc"}
        if leftover:
            return []
        self.catalog.fs.delete(root)
        return [f"{root} (data root of an earlier run, now empty, deleted)"]

    def _partition_clause(self, columns: list[str], values: tuple[str, ...]) -> str:
        pairs = ", ".join(f"{quote(c)} = {sql_string_literal(v)}" for c, v in zip(columns, values, strict=True))
        return f"PARTITION ({pairs})"

    def _publish_partitions(self, target_info: TableInfo | None, staged: TableInfo, report: PhaseReport) -> None:
        target = self.table.target
        if target_info is None or target_info.table_type == "VIEW":
            raise PublishError(f"{target} disappeared since begin; the next try will create it")
        assert self._schema is not None
        if drift := self.schema_drift(target_info, self._schema):
            raise PublishError(f"{target} changed since begin: {'; '.join(drift)}")
        columns = target_info.partition_columns
        staged_partitions = self.catalog.partitions(staged.ref, columns)
        current = self.catalog.partitions(target, columns)
        switched: list[tuple[tuple[str, ...], str | None]] = []
        started = time.monotonic()
        added = sorted((v, loc) for v, loc in staged_partitions.items() if v not in current)
        try:
            if added:  # one metastore call (add_partitions), all or nothing
                clauses = " ".join(
                    f"{self._partition_clause(columns, values)} LOCATION {sql_string_literal(location)}"
                    for values, location in added
                )
                self.catalog.sql(f"ALTER TABLE {target.quoted} ADD {clauses}")
                switched += [(values, None) for values, _ in added]
                self._fault("publish_between_partitions")
            existing = {v: loc for v, loc in staged_partitions.items() if v in current}
            if existing:

                def record(values: list[tuple[str, ...]]) -> None:
                    switched.extend((v, current[v]) for v in values)
                    self._fault("publish_between_partitions")

                self.catalog.engine.set_partition_locations(target, columns, existing, record)
            switched_at = time.monotonic()
            if not self._still_own_staging():
                raise FencedError(f"a newer try took over while try {self.table.try_number} published; undone")
        except Exception as exc:
            self._revert_partitions(columns, switched)
            if isinstance(exc, FencedError):
                raise
            raise PublishError(
                f"switching partitions of {target} failed ({first_line(exc)}); the ones already switched were "
                "switched back"
            ) from exc
        seconds = switched_at - started  # as for a flip: the metastore calls, not the fence re-check
        self.published = True
        self.outcome = Outcome.PUBLISHED
        names = ["/".join(f"{c}={v}" for c, v in zip(columns, values, strict=True)) for values, _ in switched]
        self.details["publish"] = {
            "mechanism": Publish.PARTITIONS.value,
            "seconds": round(seconds, 3),
            "partitions": names,
        }
        report.touched.append(f"{target}: {len(switched)} partition(s) switched in {seconds:.3f}s ({', '.join(names)})")
        steps: list[tuple[str, Callable[[], None]]] = [
            ("user table properties", lambda: self._set_user_properties()),
            ("drop the staging metadata", lambda: self.catalog.drop(staged.ref)),
            (
                "remove superseded partitions",
                lambda: report.touched.extend(self._remove_superseded_partitions(columns, switched)),
            ),
        ]
        for label, step in steps:
            try:
                step()
            except Exception as exc:
                self.details.setdefault("finalize_pending", []).append(f"{label}: {first_line(exc)}")
                self.log.warning(f"published, but could not {label}: {first_line(exc)}")

    def _set_user_properties(self) -> None:
        if self.table.table_properties:
            self.catalog.set_properties(self.table.target, dict(self.table.table_properties))

    def _revert_partitions(self, columns: list[str], switched: list[tuple[tuple[str, ...], str | None]]) -> None:
        target = self.table.target
        for values, old_location in reversed(switched):
            clause = self._partition_clause(columns, values)
            try:
                if old_location is None:
                    self.catalog.sql(f"ALTER TABLE {target.quoted} DROP IF EXISTS {clause}")
                else:
                    self.catalog.sql(
                        f"ALTER TABLE {target.quoted} {clause} SET LOCATION {sql_string_literal(old_location)}"
                    )
            except Exception as exc:
                self.log.warning(f"could not switch {clause} of {target} back: {first_line(exc)}")

    def _remove_superseded_partitions(
        self, columns: list[str], switched: list[tuple[tuple[str, ...], str | None]]
    ) -> list[str]:
        """Retire old partition data this provider wrote (its data root has our marker file)."""
        touched: list[str] = []
        swept: set[str] = set()
        for _, old_location in switched:
            if not old_location:
                continue
            root = old_location.rstrip("/").rsplit("/", len(columns))[0]
            if self.catalog.read_marker(root) is None:
                self.details.setdefault("superseded_kept", []).append(old_location)
                continue
            if root not in swept:
                swept.add(root)
                touched += self._sweep(root, depth=len(columns))
            touched.append(self._retire(old_location))
            touched += self._delete_if_empty(root)
        return touched

    def _publish_by_swap(self, target_info: TableInfo, report: PhaseReport) -> None:
        staging, target, backup = self.table.staging_table(), self.table.target, self.table.backup_table()
        if target_info.table_type != "MANAGED":
            raise UnsupportedTargetError(f"{target} became a {target_info.table_type} table; not replacing it")
        self.catalog.set_properties(
            target,
            {
                markers.SUPERSEDED_BY: markers.superseded_by_value(self.table.txn_id, self.table.try_number),
                markers.SUPERSEDED_TARGET: target.qualified,
                markers.SUPERSEDED_AT: now_iso(),
            },
        )
        started = time.monotonic()
        try:
            self.catalog.rename(target, backup)
        except Exception as exc:
            self._unset_superseded(target)
            raise PublishError(f"could not move {target} aside: {first_line(exc)}; it is unchanged") from exc
        gap_started = time.monotonic()
        try:
            self._fault("publish_after_move_aside")
            self.catalog.rename(staging, target)
        except Exception as exc:
            self._restore(backup, target)
            raise PublishError(
                f"could not rename {staging} to {target}: {first_line(exc)}; the previous version was restored"
            ) from exc
        finished = time.monotonic()
        self.published = True
        self.outcome = Outcome.PUBLISHED
        self.details["publish"] = {
            "mechanism": Publish.SWAP.value,
            "seconds": round(finished - started, 3),
            "unavailable_seconds": round(finished - gap_started, 3),
        }
        report.touched.append(
            f"{target} -> {backup}, {staging} -> {target} (target missing for {finished - gap_started:.3f}s)"
        )
        report.touched += self._settle_backup(backup, self.catalog.table_info(backup), self.table.try_number)

    def _unset_superseded(self, ref: TableRef) -> None:
        try:
            keys = ", ".join(map(sql_string_literal, markers.SUPERSEDED_KEYS))
            self.catalog.sql(f"ALTER TABLE {ref.quoted} UNSET TBLPROPERTIES IF EXISTS ({keys})")
        except Exception as exc:
            self.log.warning(f"could not remove {markers.SUPERSEDED_BY} from {ref}: {first_line(exc)}")

    def _restore(self, backup: TableRef, target: TableRef) -> None:
        self.catalog.rename(backup, target)
        self._unset_superseded(target)
        self.log.info(f"restored the previous version: {backup} -> {target}")

    # -- abort ---------------------------------------------------------------------------------

    def abort(self, report: PhaseReport) -> None:
        report.touched += self.clean_tries(up_to=self.table.try_number)
        info = self.catalog.table_info(self.table.target)
        if info is not None and self.published_try(info) is not None:
            self.details["published_by_try"] = self.published_try(info)
            self.log.warning(
                f"{self.table.target} had been published by try {self.details['published_by_try']} before "
                "the failure; it is complete and stays"
            )
        self.reached = "aborted"
        self.outcome = Outcome.ABORTED

    def clean_tries(self, up_to: int, *, delete_dirs: bool = True) -> list[str]:
        """Remove staging of tries <= ``up_to`` and restore a target a crashed swap moved aside.

        Managed staging goes with its directory at once: the rename that would publish it needs the
        table, so a dropped one can never be published. An external (flip) staging directory could
        still be flipped in by a paused older try, so with ``delete_dirs=False`` only its metadata
        goes, and the directory waits until this try has published or aborted.
        """
        touched: list[str] = []
        target, txn_id = self.table.target, self.table.txn_id
        found = [
            (parsed, ref)
            for parsed, ref in self.catalog.reserved_tables(target.database, txn_id)
            if parsed.try_number <= up_to
        ]
        # Backups first: a target moved aside must be back before its staging goes.
        for parsed, ref in sorted(found, key=lambda item: (item[0].role != "backup", item[0].try_number)):
            info = self.catalog.table_info(ref)
            if info is None:
                continue
            if parsed.role == "backup":
                touched += self._settle_backup(ref, info, parsed.try_number)
            elif markers.owned_by(info.properties, txn_id) and (
                markers.marker_try(info.properties) == parsed.try_number
            ):
                self.catalog.drop(ref)
                what = "metadata" if info.table_type == "EXTERNAL" else "table and data"
                touched.append(f"{ref} (staging of try {parsed.try_number} dropped: {what})")
            else:
                self.log.warning(f"{ref} has a reserved name but not this transaction's markers; left alone")
        if delete_dirs:
            touched += self._clean_orphan_directories(up_to)
        return touched

    def _settle_backup(self, backup: TableRef, info: TableInfo | None, try_number: int) -> list[str]:
        expected = markers.superseded_by_value(self.table.txn_id, try_number)
        if info is None or info.properties.get(markers.SUPERSEDED_BY) != expected:
            self.log.warning(f"{backup} has a reserved name but was not moved aside by this transaction")
            return []
        target = self.table.target
        current = self.catalog.table_info(target)
        if current is None:
            self._restore(backup, target)
            return [f"{backup} -> {target} (restored the version an interrupted replace had moved aside)"]
        if self.published_try(current) is None:
            self.log.warning(
                f"{backup} holds the version of {target} that this transaction moved aside, but {target} now "
                "belongs to someone else; keeping it"
            )
            return []
        if markers.TXN_ID not in info.properties:
            self.details["superseded_kept"] = backup.qualified
            self.log.warning(
                f"the previous version of {target} was not created by this provider; it is kept as {backup}: "
                "drop it once no reader needs it"
            )
            return []
        self.catalog.drop(backup)
        return [f"{backup} (previous version dropped)"]

    def _clean_orphan_directories(self, up_to: int) -> list[str]:
        touched = []
        location = self.catalog.db_location(self.table.target.database)
        live = self.catalog.live_locations(self.table.target)
        for name in self.catalog.fs.list_names(location, markers.name_pattern(self.table.txn_id)):
            parsed = markers.parse_reserved_name(name)
            if not parsed or parsed.tag != markers.txn_tag(self.table.txn_id) or parsed.try_number > up_to:
                continue
            path = f"{location}/{name}"
            if any(p == path or p.startswith(path + "/") for p in live):
                continue  # the target reads from it (a flip, or partitions switched in)
            if self.spark.catalog.tableExists(self.table.target.with_table(name).quoted):
                continue  # still registered (handled above, or not ours)
            marker = self.catalog.read_marker(path)
            created_here = path == self.details.get("staging_location", "").rstrip("/")
            if (
                (marker is not None and marker.txn_id == self.table.txn_id)
                or created_here
                or not self.catalog.fs.has_files(path)
            ):
                self.catalog.fs.delete(path)
                touched.append(f"{path} (orphan staging directory deleted)")
            else:
                self.log.warning(f"{path} looks like staging but carries no marker of this transaction; left alone")
        return touched


def classify(exc: BaseException) -> CtasError:
    """Map an exception from a phase to a provider error with a stable code."""
    if isinstance(exc, CtasError):
        return exc
    from airflow_provider_ctas.core.errors import QueryFailedError, SparkJobError, deterministic_condition

    condition = error_condition(exc)
    message = first_line(exc)
    text = f"{condition + ': ' if condition else ''}{message}"
    if deterministic_condition(condition, str(exc)):
        return QueryFailedError(text)
    return SparkJobError(text)
