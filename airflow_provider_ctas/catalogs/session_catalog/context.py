"""What every part of one driver-side run shares: the session, the transaction, the request, and
what has happened so far."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.metastore.catalog import CatalogClient, TableInfo
from airflow_provider_ctas.catalogs.progress import Progress
from airflow_provider_ctas.catalogs.session_catalog.table import SessionCatalogTable
from airflow_provider_ctas.core import faults, markers
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.durable import Candidate
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.protocol import PhaseRequest
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Reporter


@dataclass
class RunContext:
    spark: SparkSession
    table: SessionCatalogTable
    request: PhaseRequest
    log: Reporter
    catalog: CatalogClient
    progress: Progress = field(default_factory=Progress)
    details: Details = field(default_factory=Details)
    retained: dict[str, markers.Retained] = field(default_factory=dict)
    """Superseded versions kept for readers, recorded in the new version's marker after publishing."""
    staged_schema: StructType | None = None
    """The staging's columns, as begin created it (to read staging that is only a directory)."""
    storage_options: dict[str, str] = field(default_factory=dict)
    """The target's ``OPTIONS``, repeated by the write into a staging directory and its reads:
    staged files are the target's once it is flipped or its partitions switched."""
    column_writes: dict[str, str] = field(default_factory=dict)
    """The expression a column is written with into a staging directory where the target's declared
    type asks more of it than the query's value (a CHAR or VARCHAR length), by column name."""
    staging_directory: str | None = None
    """Set when this try's staging is only a marked directory (a flip, a partition switch), which
    its marker fences."""
    staging_marker: markers.MarkerFile | None = None
    """The staging directory's marker as the fence last read it (its re-check right after the
    publish): the marker update starts from it instead of reading the file again."""
    staged_partitions: dict[tuple[str, ...], str] | None = None
    """The partitions prepare wrote into a staging directory, with their directories."""
    adopted: Candidate | None = None
    """The prepared staging of an earlier try that this try took over (``durable=True``)."""
    meanwhile: list[threading.Thread] = field(default_factory=list)
    """After-publish steps running beside the others (:meth:`after_publish_meanwhile`)."""

    @property
    def staging_table(self) -> TableRef:
        """This try's staging table: the one it created, or the one it adopted (which keeps the
        name of the try that prepared it; its markers name this try)."""
        if self.adopted is not None and self.adopted.record.registered:
            return self.table.staging_table(self.adopted.name_try)
        return self.table.staging_table()

    def fault(self, point: str) -> None:
        faults.inject(self.request.faults, point, self.table.try_number, self.log.info, self.table.target.qualified)

    def after_publish(self, label: str, step: Callable[[], None]) -> None:
        """Run a step that follows the publish: the publish stands whatever happens, so a failure is
        reported (``finalize_pending``, a warning), never raised."""
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - nothing after a publish may turn it into a failure
            self.details.setdefault("finalize_pending", []).append(f"{label}: {first_line(exc)}")
            self.log.warning(f"published, but could not {label}: {first_line(exc)}")

    def after_publish_meanwhile(self, label: str, step: Callable[[], None]) -> None:
        """An after-publish step run beside the publisher's next ones, for a step whose round trips
        touch nothing they touch: over Spark Connect a flip's provenance (two statements on the
        target) beside retention's file reads and writes (issue 53). The executor waits for it
        (:meth:`settle`) when the publisher returns, so nothing after (the comments: the metastore
        replaces a table's whole entry on each alter, and two at once can lose one) runs beside it."""
        thread = threading.Thread(target=self.after_publish, args=(label, step), name=f"airflow-ctas {label}")
        thread.start()
        self.meanwhile.append(thread)

    def settle(self) -> None:
        while self.meanwhile:
            self.meanwhile.pop().join()

    def published_try(self, info: TableInfo) -> int | None:
        """The try of this transaction that published ``info``, or None.

        A flipped table's data directory (reserved name, marker file) is the authority: the flip
        that put it there is atomic, while over Spark Connect the properties are copied afterwards
        and can lag.
        A renamed-in table got its properties atomically with the rename.
        """
        location = (info.location or "").rstrip("/")
        if markers.parse_reserved_name(location.rsplit("/", 1)[-1]):
            marker = self.catalog.read_marker(location)
            return marker.try_number if marker and marker.txn_id == self.table.txn_id else None
        if markers.owned_by(info.properties, self.table.txn_id):
            return markers.marker_try(info.properties)
        return None
