"""What every part of one Delta run shares inside the driver: the session, the transaction, how
far the run got, and how this try's Delta commits are made and found again (its provenance in
each commit's ``userMetadata``, its application version, which fences earlier tries)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.delta import log as delta_log
from airflow_provider_ctas.catalogs.delta.table import DeltaTable
from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient
from airflow_provider_ctas.catalogs.progress import Progress
from airflow_provider_ctas.catalogs.provenance import try_markers
from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.core import faults, markers
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import FencedError, PublishError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.protocol import PhaseRequest
from airflow_provider_ctas.spark.errors import error_condition, first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_ctas.spark.engine import Engine, Reporter

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
FENCE_OF = "airflow_ctas.fence_of"
"""In a fence commit's ``userMetadata``: the try whose version it records."""
FENCED_BY_DELTA = "ConcurrentTransactionException"
"""Delta's error when another commit recorded a version for the application this write read."""


@dataclass(frozen=True)
class Commit:
    """One of this try's Delta commits, as its log or history records it."""

    version: int
    rows: int


@dataclass
class DeltaRun:
    spark: SparkSession
    table: DeltaTable
    request: PhaseRequest
    log: Reporter
    engine: Engine
    progress: Progress
    details: Details
    """What the run reports (XCom); nothing reads it back."""
    catalog: CatalogClient

    def fault(self, point: str) -> None:
        faults.inject(self.request.faults, point, self.table.try_number, self.log.info, self.table.target.qualified)

    def query(self) -> DataFrame:
        return self.spark.sql(as_subquery(self.request.sql or ""))

    def managed_location(self, table: TableRef) -> str:
        """Where Delta's catalog puts a managed table: its database's location, plus its name."""
        return f"{self.catalog.db_location(table.database)}/{table.table}"

    def with_app(self, writer: Any, version: int) -> Any:
        return writer.option("txnAppId", self.table.app_id).option("txnVersion", str(version))

    @contextmanager
    def user_metadata(self, fence: int | None = None) -> Iterator[None]:
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

    def fenced(self, write: Callable[[], object]) -> None:
        """Runs a fenced write; Delta's refusal of it reads as this try being fenced."""
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

    def our_commit(self, name: str, fence: int | None = None) -> Mapping[str, Any] | None:
        """This try's commit (its write, or its fence of ``fence``) in ``name``'s recent history,
        found by its provenance, not by position: another commit may have followed it."""
        for row in self.spark.sql(f"DESCRIBE HISTORY {name} LIMIT 20").collect():
            if self._is_ours(row["userMetadata"], fence):
                return dict(row.asDict())
        return None

    def logged_commit(self, name: str, location: str | None, version: int | None = None) -> Commit | None:
        """This try's write when it is the newest commit in the log at ``location`` (``version``, or
        the highest one listed), read from the log; the history when another commit followed it or
        the log is elsewhere. Its version and row count go into the run's report."""
        fs = self.catalog.fs
        if location is not None and version is None:
            version = delta_log.latest_version(fs, location)
        info = delta_log.commit_info(fs, location, version) if location is not None and version is not None else None
        found: Mapping[str, Any] | None = None
        if info is not None and self._is_ours(info.get("userMetadata"), None):
            found = {**info, "version": version}
        found = found or self.our_commit(name)
        if found is None:
            return None
        commit = Commit(int(found["version"]), int((found.get("operationMetrics") or {}).get("numOutputRows", 0)))
        self.details["delta_version"], self.details["row_count"] = commit.version, commit.rows
        return commit

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
