"""What a catalog strategy declares, so that the operator, the driver, GC and lineage can ask for
it instead of naming a table format themselves.

A strategy is a two-phase table kind (FLIP-305's ``TwoPhaseCatalogTable``): the formats and catalogs
it serves, how it validates a request into its serializable table, its driver-side executor and
GC, and the OpenLineage namespace of its tables. Driver-side pieces load lazily (they need
pyspark), from code, never from a name in the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.transaction import TransactionKey, TwoPhaseTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.core.protocol import PhaseReport, PhaseRequest, Reached
    from airflow_provider_ctas.spark.engine import Reporter


class Executor(Protocol):
    """The driver side of one try: runs phases by name and says how far it got."""

    @property
    def nothing_to_do(self) -> bool: ...
    @property
    def published(self) -> bool: ...
    @property
    def reached(self) -> Reached: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def details(self) -> Mapping[str, Any]: ...

    def run(self, phase: str, report: PhaseReport) -> None: ...
    def clean_up_this_try(self) -> list[str]: ...
    def clean_up_after_publish(self) -> list[str]:
        """After a failure that followed the publish: what the publish would have removed next."""
        ...

    def spark_jobs(self) -> int | None: ...
    def keep_for_next_try(self, digest: str) -> str:
        """Record the prepared staging for the next try (durable tries); returns where."""
        ...


@dataclass(frozen=True)
class StagingReader:
    """How a strategy's staging directory that has no catalog entry (its task died between writing
    it and registering it) shows its ownership markers."""

    name: str
    """How GC names such staging ("Delta")."""
    read: Callable[[Any, str], dict[str, str] | None]
    """(filesystem, location): the markers, or None when the directory is not such staging."""


class DriverSide(Protocol):
    def executor(self, spark: SparkSession, table: TwoPhaseTable, request: PhaseRequest, log: Reporter) -> Executor: ...
    def gc(
        self, spark: SparkSession, settings: Mapping[str, Any], log: Reporter, staging_readers: Sequence[StagingReader]
    ) -> dict[str, Any]:
        """One GC pass; ``staging_readers``: every strategy's, so a pass over a database recognises
        staging that other strategies write into it (the registry hands them over)."""
        ...


@dataclass(frozen=True)
class RequestSpec:
    """An operator's request, before a strategy validates it into its table."""

    key: TransactionKey
    conn_id: str
    target: str
    mode: str
    table_format: str
    partition_by: Iterable[str] | None = None
    table_properties: Mapping[str, object] | None = None
    allow_swap: bool = False
    superseded_retention: object = None
    comment: object = None
    column_comments: object = None


@dataclass(frozen=True)
class Strategy:
    kind: str
    """The ``kind`` its serialized tables carry (``core.transaction.register_kind``)."""
    formats: frozenset[str]
    catalogs: frozenset[str]
    validate: Callable[[RequestSpec], TwoPhaseTable]
    """Validate a request (names, mode, format, options) into the table; raises InvalidInputError."""
    validate_target: Callable[[object], TableRef]
    """The target as this strategy's catalogs name it; raises InvalidInputError."""
    check_options: Callable[[str, str, object], None]
    """(mode, table_format, superseded_retention): the operator's checks at DAG-parse time."""
    driver: Callable[[], DriverSide]
    lineage_namespace: Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], str | None]
    """(the operator's Spark conf, the run's details): the OpenLineage namespace of the tables it
    writes; what the driver reported it used, once it ran, else what the conf says (None when only
    the driver can tell: a Glue catalog whose account the conf does not name)."""
    audits: bool = True
    """Whether ``checks=`` are evaluated on the staged version before the publish."""
    durable: bool = False
    """Whether a prepared try's staging can outlive its task and be adopted by the next try."""
    groups: bool = False
    """Whether its tables can be members of a publish group (published together by one commit)."""
    staging_reader: StagingReader | None = None
    """For a strategy whose staging can exist as a bare directory in a session-catalog database."""
    gc_scope: str | None = None
    """Where its GC pass collects: ``"session"`` (databases of the session catalog) or ``"named"``
    (namespaces of a catalog named by ``--catalog``); None when another pass collects its staging."""

    def namespace_after_run(self, conf: Mapping[str, Any] | None, details: Mapping[str, Any]) -> str:
        """The namespace once the driver ran: every driver reports the catalog it used."""
        namespace = self.lineage_namespace(conf, details)
        if namespace is None:
            raise RuntimeError(f"the {self.kind} driver did not report its catalog (details: metastore_uris)")
        return namespace
