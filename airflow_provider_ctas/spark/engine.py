"""What differs between a classic SparkSession (spark-submit's driver) and a Spark Connect session.

The phases are the same code for both; they reach the JVM-only parts (Hadoop FileSystem, the
external catalog's partition listing, the status tracker, write metrics) only through here.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.identifiers import TableRef, quote, sql_string_literal
from airflow_provider_ctas.spark.catalog_entry import (
    MISSING_CONDITIONS,
    CatalogEntry,
    described,
    described_location,
    entry_of,
    properties_by_sql,
    properties_of,
    raw_metadata,
    serves_fully,
)
from airflow_provider_ctas.spark.errors import error_condition
from airflow_provider_ctas.spark.filesystem import ConnectFileSystem, FileSystem, HadoopFileSystem
from airflow_provider_ctas.spark.plan_lineage import InputEntry, leaf_inputs, plan_column_lineage
from airflow_provider_ctas.spark.statements import statement_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HISTORY_SERVER_ADDRESS = "spark.yarn.historyServer.address"
"""Spark's setting for the History Server's address (``host:port``, no scheme). Spark's YARN
integration reads it; nothing else in Spark names a History Server, so it serves every master."""


def history_url(address: str | None, event_log_enabled: str | None, application_id: str) -> str | None:
    """The application's page on the History Server, or None: without event logs the server never
    sees the application, and an address with an unresolved ``${...}`` reference (YARN resolves
    those from Hadoop's configuration, a driver's Spark conf does not) names no host."""
    if not address or "${" in address or str(event_log_enabled).strip().lower() != "true":
        return None
    base = address.strip().rstrip("/")
    if "://" not in base:
        base = f"http://{base}"
    return f"{base}/history/{application_id}/jobs/"


PROGRESS_INTERVAL_SECONDS = 15.0
# Environment variables with which pyspark's SparkSession.builder makes a Spark Connect session.
CONNECT_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
JOB_GROUP = "airflow-ctas"
# Where a listener that watches SQL statements is registered.
LISTENER_SETTINGS = ("spark.extraListeners", "spark.sql.queryExecutionListeners")
Switched = Callable[[list[tuple[tuple[str, ...], str]]], None]
"""Told which partitions now point at their new location, after each metastore call, each with the
location it had just before (read right before that call)."""


class Reporter(Protocol):
    def info(self, message: str) -> None: ...

    def warning(self, message: str) -> None: ...


def is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


class _Throttled:
    """Logs at most every PROGRESS_INTERVAL_SECONDS what a long write is doing."""

    def __init__(self, log: Reporter, label: str) -> None:
        self.log, self.label = log, label
        self.since = self.last = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL_SECONDS:
            return False
        self.last = now
        return True

    def emit(self, stages: list[str]) -> None:
        elapsed = time.monotonic() - self.since
        self.log.info(f"{self.label}: running for {elapsed:.0f}s; {'; '.join(stages) or 'no active stage'}")


OBSERVED_VIEW = "__airflow_ctas_written__"
"""The observed query an ``INSERT INTO ... BY NAME`` reads (``insert_observed``)."""


SETTLE_SECONDS = 30.0
"""How long a clean-up after a failure waits for the failed job's tasks to end."""


class ClassicEngine:
    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def filesystem(self, scratch_database: str | None = None) -> FileSystem:
        return HadoopFileSystem(self.spark)

    def start(self) -> None:
        self.spark.sparkContext.setJobGroup(JOB_GROUP, "airflow-provider-ctas")

    def settle(self, timeout: float = SETTLE_SECONDS) -> int:
        """Cancel this session's jobs and wait until none of their tasks runs (at most ``timeout``
        seconds); the tasks still running. A write's error reaches the driver while the failed
        job's other tasks may still be writing: a Delta write's tasks open their files in the
        table's directory, so a clean-up that removed the staging first found that directory made
        again, without its log (the chaos soak, seed 2075394856)."""
        context = self.spark.sparkContext
        context.cancelAllJobs()
        tracker = context._jsc.sc().statusTracker()
        deadline = time.monotonic() + timeout
        while (running := sum(info.numRunningTasks() for info in tracker.getExecutorInfos())) > 0:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        return int(running)

    def input_tables(self, frame: DataFrame) -> list[str | dict[str, str]] | None:
        """Every catalog table the analysed query reads: ``database.table`` for the session
        catalog's, ``{"catalog": ..., "name": "namespace.table"}`` for another catalog's (an Iceberg
        ``SparkCatalog``'s, read through DataSource V2), ``{"path": uri}`` for files read by path
        (``parquet.`s3a://...```), ``{"jdbc": url, "table": ...}`` for a JDBC table (its URL stays in
        the driver: only what names the source leaves it). CTEs resolve to what they read;
        table-valued functions (``range``) and temporary views' sources count as what they are."""
        leaves = frame._jdf.queryExecution().analyzed().collectLeaves().iterator()
        found: list[InputEntry] = []
        while leaves.hasNext():
            found += [entry for entry in leaf_inputs(leaves.next()) if entry not in found]
        tables = sorted(e for e in found if isinstance(e, str))
        others = [e for e in found if not isinstance(e, str)]
        order = ("catalog", "path", "jdbc")
        return [
            *tables,
            *sorted(others, key=lambda e: (order.index(next(k for k in order if k in e)), sorted(e.items()))),
        ]

    def column_lineage(self, frame: DataFrame) -> dict[str, list[list[Any]]] | None:
        """Per output column, the input columns its values come from (``plan_lineage``), by their
        index in ``input_tables``."""
        inputs = self.input_tables(frame) or []
        return plan_column_lineage(frame._jdf.queryExecution().analyzed(), inputs)

    def application(self) -> dict[str, str | None]:
        """Where the work runs: the application id, its live UI (while it runs), its page on the
        Spark History Server when one is configured (it outlives the application), the master and
        Spark's version."""
        sc = self.spark.sparkContext
        conf = sc.getConf()
        application: dict[str, str | None] = {
            "id": sc.applicationId,
            "ui": sc.uiWebUrl,
            "master": sc.master,
            "version": sc.version,
        }
        history = history_url(conf.get(HISTORY_SERVER_ADDRESS), conf.get("spark.eventLog.enabled"), sc.applicationId)
        if history:
            application["history"] = history
        return application

    def hive_setting(self, name: str) -> str:
        """What this driver's Hive client reads for ``name``: Spark conf, properties file and
        hive-site.xml all end up in the Hadoop configuration; empty if unset."""
        return str(self.spark.sparkContext._jsc.hadoopConfiguration().get(name) or "")

    def metastore_uris(self) -> str:
        """Empty for the embedded metastore."""
        return self.hive_setting("hive.metastore.uris")

    def database_location(self, database: str) -> str | None:
        """One ``get_database``; None when there is no such database. The session catalog's
        ``databaseExists`` and ``getDatabase`` make three each (counted: benchmarks/metastore_calls.py)."""
        from pyspark.errors import AnalysisException

        try:
            found = self.spark._jsparkSession.sessionState().catalog().externalCatalog().getDatabase(database)
        except AnalysisException as exc:
            if error_condition(exc).startswith(MISSING_CONDITIONS):
                return None
            raise
        return str(found.locationUri().toString())

    def table_entry(self, ref: TableRef, expected: bool = False, storage: bool = False) -> CatalogEntry | None:
        """One session-catalog call for Spark's own sources; the SQL commands for the others, which
        that call has shown to exist. Storage options always (only Spark's own sources have them, and
        the call reads them), so ``expected`` and ``storage`` change nothing here."""
        metadata = raw_metadata(self.spark, ref)
        if metadata is None:
            return None
        if serves_fully(metadata):
            return entry_of(self.spark, metadata)
        return described(self.spark, ref, expected=True, storage=True)

    def table_location(self, ref: TableRef) -> str | None:
        entry = self.table_entry(ref)
        return None if entry is None else entry.location

    def table_properties(self, ref: TableRef) -> dict[str, str] | None:
        metadata = raw_metadata(self.spark, ref)
        if metadata is None:
            return None
        if serves_fully(metadata) or _is_view(metadata):
            return properties_of(self.spark, metadata)
        return properties_by_sql(self.spark, ref)

    def create_view(self, ref: TableRef, comment: str, properties: Mapping[str, str]) -> None:
        """A view of one constant row as one catalog call, without ``CREATE VIEW``'s analysis: that
        statement and its ``DROP VIEW`` cost a fresh driver about 0.4 s more (measured). Fails when
        the name is taken, also when a concurrent call took it (the metastore creates a name once)."""
        definition = _view_definition(self.spark, ref, comment, properties)
        if definition is None:
            _create_view_by_sql(self.spark, ref, comment, properties)
            return
        self._external().createTable(definition, False)

    def drop_view(self, ref: TableRef) -> None:
        """One catalog call; refuses a table (a view's name never drops a table)."""
        before = raw_metadata(self.spark, ref)
        if before is None:
            return
        if not _is_view(before):
            raise ValueError(f"{ref} is not a view; not dropped")
        self._external().dropTable(ref.database, ref.table, True, False)

    def partitions(self, ref: TableRef, columns: list[str]) -> dict[tuple[str, ...], str]:
        """One metastore call; Spark SQL has no statement that lists partition locations."""
        jvm: Any = self.spark._jvm
        partitions = self._external().listPartitions(ref.database, ref.table, jvm.scala.Option.apply(None))
        found: dict[tuple[str, ...], str] = {}
        values_of, location_of = _Values(columns), _location_reader(jvm)
        iterator = partitions.iterator()
        while iterator.hasNext():
            partition = iterator.next()
            found[values_of(partition)] = location_of(partition)
        return found

    def set_properties(self, ref: TableRef, properties: Mapping[str, str]) -> None:
        """``ALTER TABLE t SET TBLPROPERTIES`` as one catalog call, without a statement's first-use
        cost in a fresh driver; a provider with its own catalog (Delta) keeps the statement."""
        before = raw_metadata(self.spark, ref)
        if before is None or not serves_fully(before):
            _set_properties_by_sql(self.spark, ref, properties)
            return
        self._external().alterTable(self._changed(before, properties))

    def drop(self, ref: TableRef) -> None:
        """``DROP TABLE IF EXISTS t PURGE`` as one catalog call (a managed table's data goes with it,
        an external table's stays) for Spark's own sources; views and other providers keep the
        statement, which refuses a view and lets Delta's catalog drop its tables."""
        before = raw_metadata(self.spark, ref)
        if before is None:
            return
        if not serves_fully(before) or str(before.tableType().name()).upper() == "VIEW":
            _drop_by_sql(self.spark, ref)
            return
        jvm: Any = self.spark._jvm
        identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier(ref.table, jvm.scala.Some(ref.database))
        self.spark._jsparkSession.sessionState().catalog().dropTable(identifier, True, True)

    def make_external(self, ref: TableRef) -> bool:
        """Turn a managed table into an external one at the same location, in one catalog call.

        Spark's rename of a managed table points it at the new name's default location whatever
        its location was (``HiveExternalCatalog.renameTable`` rewrites the ``path`` option; the
        metastore keeps the old one): a managed table flipped to another directory and then
        renamed reads from a directory that is empty or holds something else. An external table is
        renamed as metadata only. SQL cannot do this (``EXTERNAL`` is a reserved property)."""
        before = raw_metadata(self.spark, ref)
        if before is None or not serves_fully(before):
            return False
        jvm: Any = self.spark._jvm
        external = jvm.org.apache.spark.sql.catalyst.catalog.CatalogTableType.EXTERNAL()
        self._external().alterTable(_with_field(before, before.tableType(), external))
        return True

    def relocate(self, ref: TableRef, location: str, properties: Mapping[str, str]) -> Callable[[], None] | None:
        """``ALTER TABLE t SET LOCATION`` and ``SET TBLPROPERTIES`` as one catalog call (one metastore
        ``alter_table``): readers never see the new location without its provenance. Returns the
        call that puts the entry back as it was; None where the statements stay: a provider with its
        own catalog, or a listener registered by configuration, which sees a publish only as a
        statement (Spark's OpenLineage listener names the target by it). Statistics describe the old
        data, so they go, as the statement drops them."""
        conf = self.spark.sparkContext.getConf()
        if any((conf.get(key) or "").strip() for key in LISTENER_SETTINGS):
            return None
        before = raw_metadata(self.spark, ref)
        if before is None or not serves_fully(before):
            return None
        jvm: Any = self.spark._jvm
        uri = jvm.scala.Some(jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.stringToURI(location))
        storage = _with_field(before.storage(), before.storage().locationUri(), uri)
        catalog = self._external()
        catalog.alterTable(_with_field(self._changed(before, properties), before.storage(), storage))
        if before.stats().isDefined():  # alterTable keeps them (measured); a second call, as the statement makes
            catalog.alterTableStats(ref.database, ref.table, jvm.scala.Option.empty())
        return lambda: catalog.alterTable(before)

    def _external(self) -> Any:
        """The external catalog (with its listeners): the session catalog's alterTable and
        alterPartitions first check that the database and the table exist, three more metastore
        calls each (counted: benchmarks/metastore_calls.py); the table was just read."""
        return self.spark._jsparkSession.sessionState().catalog().externalCatalog()

    def _changed(self, before: Any, properties: Mapping[str, str]) -> Any:
        """A copy of a JVM ``CatalogTable`` with more properties."""
        jvm: Any = self.spark._jvm
        merged = jvm.java.util.HashMap()
        for key, value in {**properties_of(self.spark, before), **properties}.items():
            merged.put(key, value)
        return _with_field(before, before.properties(), jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(merged))

    def set_partition_locations(
        self,
        ref: TableRef,
        columns: list[str],
        locations: dict[tuple[str, ...], str],
        switched: Switched | None = None,
        only_from: Mapping[tuple[str, ...], str] | None = None,
    ) -> list[tuple[str, ...]]:
        """Point existing partitions at new locations in one metastore call (Hive's alter_partitions).

        What ``ALTER TABLE t PARTITION (...) SET LOCATION`` does for one partition, for all of them:
        readers see either none or all of the partitions switched. ``only_from``: a partition moves
        only while it still points there (read in the listing right before the call); returns the
        partitions left as they were for that reason.
        """
        jvm: Any = self.spark._jvm
        catalog = self._external()
        changed = jvm.java.util.ArrayList()
        previous: dict[tuple[str, ...], str] = {}
        kept: list[tuple[str, ...]] = []
        # Looked up once: each lookup through ``jvm.<package>`` is a round trip of its own, and the
        # loop's round trips are most of a large switch's time.
        values_of, location_of, relocate = _Values(columns), _location_reader(jvm), _Relocator(jvm)
        partitions = catalog.listPartitions(ref.database, ref.table, jvm.scala.Option.apply(None))
        iterator = partitions.iterator()
        while iterator.hasNext():
            partition = iterator.next()
            values = values_of(partition)
            location = locations.get(values)
            if location is None:
                continue
            # What the switch replaces, read in the call before it: a switch back restores this, not
            # an older reading (a newer try may have switched the partition since).
            previous[values] = location_of(partition)
            if only_from is not None and previous[values].rstrip("/") != only_from.get(values, "").rstrip("/"):
                kept.append(values)
                continue
            changed.add(relocate(partition, location))
        if changed.size() + len(kept) != len(locations):
            raise RuntimeError(f"{ref}: {len(locations) - changed.size()} partition(s) to switch disappeared")
        if changed.size():
            as_list = jvm.org.apache.spark.api.python.PythonUtils.toList
            catalog.alterPartitions(ref.database, ref.table, as_list(changed))
        if switched is not None:
            switched(sorted(previous.items()))
        return kept

    @contextlib.contextmanager
    def progress(self, label: str, log: Reporter) -> Iterator[None]:
        context = self.spark.sparkContext
        tracker = context.statusTracker()
        throttle, done = _Throttled(log, label), threading.Event()

        def watch() -> None:
            while not done.wait(PROGRESS_INTERVAL_SECONDS):
                stages = []
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is not None:
                        stages.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks done")
                throttle.emit(stages)

        context.setJobDescription(f"airflow-ctas {label}")
        thread = threading.Thread(target=watch, daemon=True, name="airflow-ctas-progress")
        thread.start()
        try:
            yield
        finally:
            done.set()
            context.setJobDescription(None)  # type: ignore[arg-type]

    reports_written_rows = True
    """A write command's result carries its rows (``write_metrics``)."""

    def write_metrics(self, result: DataFrame) -> Details:
        """Rows, files and bytes from the write command's own SQL metrics (no second pass over data)."""
        found: dict[str, int] = {}
        plan = result._jdf.queryExecution().executedPlan().commandPhysicalPlan()
        iterator = plan.metrics().iterator()
        while iterator.hasNext():
            entry = iterator.next()
            found[str(entry._1())] = int(entry._2().value())
        metrics: Details = {}
        if "numOutputRows" in found:
            metrics["row_count"] = found["numOutputRows"]
        if "numFiles" in found:
            metrics["files"] = found["numFiles"]
        if "numOutputBytes" in found:
            metrics["bytes"] = found["numOutputBytes"]
        return metrics

    def job_count(self) -> int | None:
        return len(self.spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP))

    def insert_observed(self, frame: DataFrame, table: TableRef) -> DataFrame | None:
        """``INSERT INTO table BY NAME`` of an observed query; the command's result (its metrics):
        the insert has no DataFrame form, so it reads the query through a temporary view, whose
        plan carries the observation."""
        frame.createOrReplaceTempView(OBSERVED_VIEW)
        try:
            return self.spark.sql(f"INSERT INTO {table.quoted} BY NAME SELECT * FROM {quote(OBSERVED_VIEW)}")
        finally:
            self.spark.sql(f"DROP VIEW IF EXISTS {quote(OBSERVED_VIEW)}")


class ConnectEngine:
    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def filesystem(self, scratch_database: str | None = None) -> FileSystem:
        return ConnectFileSystem(self.spark, scratch_database)

    def start(self) -> None:
        """Nothing: the runner tags the session's operations itself, to interrupt them."""

    def settle(self, timeout: float = 0.0) -> int:
        """Nothing to wait for here: the Connect runner interrupts the session's operations itself
        before it cleans up."""
        return 0

    def input_tables(self, frame: DataFrame) -> list[str | dict[str, str]] | None:
        """Unknown: a Connect client sees no analysed plan (lineage parses the SQL instead)."""
        return None

    def column_lineage(self, frame: DataFrame) -> dict[str, list[list[Any]]] | None:
        """Unknown, as the inputs are."""
        return None

    def application(self) -> dict[str, str | None]:
        """The Connect server's application (its UI address is not visible to a client)."""
        app_id = self.spark.conf.get("spark.app.id", None)
        return {"id": app_id, "ui": None, "master": None, "version": self.spark.version}

    def hive_setting(self, name: str) -> str:
        """From the server's Spark conf (its hive-site.xml is out of a client's reach); empty if unset."""
        return str(self.spark.conf.get(f"spark.hadoop.{name}", "") or "")

    def metastore_uris(self) -> str:
        return self.hive_setting("hive.metastore.uris")

    def database_location(self, database: str) -> str | None:
        """One round trip: asking whether it exists first would be a second (issue 53)."""
        from pyspark.errors import AnalysisException

        try:
            return str(self.spark.catalog.getDatabase(database).locationUri)
        except AnalysisException as exc:
            if error_condition(exc).startswith("SCHEMA_NOT_FOUND"):
                return None
            raise

    def table_entry(self, ref: TableRef, expected: bool = False, storage: bool = False) -> CatalogEntry | None:
        """The SQL commands: a Connect client has no handle on the server's session catalog."""
        return described(self.spark, ref, at_once=True, expected=expected, storage=storage)

    def table_location(self, ref: TableRef) -> str | None:
        """One round trip where :meth:`table_entry` makes three: a flip's re-reads of the location
        (issue 53). The table is expected to be there; if a concurrent try dropped it, the server
        logs the statement's error and this answers None."""
        return described_location(self.spark, ref)

    def table_properties(self, ref: TableRef) -> dict[str, str] | None:
        return properties_by_sql(self.spark, ref)

    def create_view(self, ref: TableRef, comment: str, properties: Mapping[str, str]) -> None:
        _create_view_by_sql(self.spark, ref, comment, properties)

    def drop_view(self, ref: TableRef) -> None:
        self.spark.sql(f"DROP VIEW IF EXISTS {ref.quoted}")

    def partitions(self, ref: TableRef, columns: list[str]) -> dict[tuple[str, ...], str]:
        """``SHOW PARTITIONS``, then one ``DESCRIBE ... PARTITION`` per partition for its location."""
        found: dict[tuple[str, ...], str] = {}
        for row in statement_rows(self.spark, f"SHOW PARTITIONS {ref.quoted}"):
            spec = {}
            for pair in str(row["partition"]).split("/"):
                key, value = pair.split("=", 1)
                spec[unquote(key).lower()] = unquote(value)
            clause = ", ".join(f"{quote(k)} = {sql_string_literal(v)}" for k, v in spec.items())
            found[tuple(spec[c.lower()] for c in columns)] = self._partition_location(ref, clause)
        return found

    def _partition_location(self, ref: TableRef, clause: str) -> str:
        described = statement_rows(self.spark, f"DESCRIBE TABLE EXTENDED {ref.quoted} PARTITION ({clause})")
        # The partition's own section comes before the table's; its Location row is the first.
        return str(next(r["data_type"] for r in described if r["col_name"] == "Location"))

    def set_properties(self, ref: TableRef, properties: Mapping[str, str]) -> None:
        _set_properties_by_sql(self.spark, ref, properties)

    def make_external(self, ref: TableRef) -> bool:
        """False: SQL cannot change a table's type, and a Connect client has no handle on the catalog."""
        return False

    def relocate(self, ref: TableRef, location: str, properties: Mapping[str, str]) -> Callable[[], None] | None:
        """None: a Connect client has no handle on the server's catalog (the caller runs the statements)."""
        return None

    def drop(self, ref: TableRef) -> None:
        _drop_by_sql(self.spark, ref)

    def set_partition_locations(
        self,
        ref: TableRef,
        columns: list[str],
        locations: dict[tuple[str, ...], str],
        switched: Switched | None = None,
        only_from: Mapping[tuple[str, ...], str] | None = None,
    ) -> list[tuple[str, ...]]:
        """One ``ALTER TABLE ... PARTITION (...) SET LOCATION`` per partition: SQL has no batch form.

        Where ``switched`` is told, each partition's location is read in the statement right before
        its switch, as the classic engine reads them in the listing before its one call: a switch
        back restores that, so a newer try's switch made while this driver stalled stands.
        ``only_from``: a partition moves only while it still points there (read the same way)."""
        kept: list[tuple[str, ...]] = []
        for values, location in sorted(locations.items()):
            clause = ", ".join(f"{quote(c)} = {sql_string_literal(v)}" for c, v in zip(columns, values, strict=True))
            read = switched is not None or only_from is not None
            previous = self._partition_location(ref, clause) if read else ""
            if only_from is not None and previous.rstrip("/") != only_from.get(values, "").rstrip("/"):
                kept.append(values)
                continue
            self.spark.sql(f"ALTER TABLE {ref.quoted} PARTITION ({clause}) SET LOCATION {sql_string_literal(location)}")
            if switched is not None:
                switched([(values, previous)])
        return kept

    @contextlib.contextmanager
    def progress(self, label: str, log: Reporter) -> Iterator[None]:
        throttle = _Throttled(log, label)

        def handler(stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
            if done or not throttle.due():
                return
            throttle.emit(
                [
                    f"stage {s.stage_id}: {s.num_completed_tasks}/{s.num_tasks} tasks done"
                    for s in stages or []
                    if not s.done
                ]
            )

        self.spark.registerProgressHandler(handler)  # type: ignore[arg-type]
        try:
            yield
        finally:
            self.spark.removeProgressHandler(handler)  # type: ignore[arg-type]

    reports_written_rows = False

    def write_metrics(self, result: DataFrame) -> Details:
        """Spark Connect returns no metrics for a write command; the caller counts the rows."""
        return {}

    def job_count(self) -> int | None:
        return None

    def insert_observed(self, frame: DataFrame, table: TableRef) -> DataFrame | None:
        """The columns in the table's order, by position: Connect returns a command's observed
        metrics to the client only for a DataFrame write (measured: none for a SQL insert reading
        an observed view), which has no result."""
        columns = self.spark.table(table.quoted).columns
        frame.select(*[quote(c) for c in columns]).write.insertInto(table.quoted)
        return None


Engine = ClassicEngine | ConnectEngine


def engine_for(spark: SparkSession) -> Engine:
    return ConnectEngine(spark) if is_connect(spark) else ClassicEngine(spark)


def _input_order(entry: dict[str, str]) -> tuple[int, list[tuple[str, str]]]:
    """Another catalog's tables, then paths, then JDBC sources; each sorted by what names it."""
    kinds = ("catalog", "path", "jdbc")
    return next(i for i, kind in enumerate(kinds) if kind in entry), sorted(entry.items())


def _set_properties_by_sql(spark: SparkSession, ref: TableRef, properties: Mapping[str, str]) -> None:
    assignments = ", ".join(f"{sql_string_literal(k)}={sql_string_literal(v)}" for k, v in properties.items())
    spark.sql(f"ALTER TABLE {ref.quoted} SET TBLPROPERTIES ({assignments})")


def _create_view_by_sql(spark: SparkSession, ref: TableRef, comment: str, properties: Mapping[str, str]) -> None:
    pairs = ", ".join(f"{sql_string_literal(k)} = {sql_string_literal(v)}" for k, v in properties.items())
    spark.sql(
        f"CREATE VIEW {ref.quoted} COMMENT {sql_string_literal(comment)} TBLPROPERTIES ({pairs}) AS {_VIEW_QUERY}"
    )


_VIEW_QUERY = "SELECT 1 AS one"
_VIEW_SCHEMA = '{"type":"struct","fields":[{"name":"one","type":"integer","nullable":false,"metadata":{}}]}'
_SCALA_MAP, _SCALA_OPTION = "scala.collection.immutable.Map", "scala.Option"


def _is_view(metadata: Any) -> bool:
    return str(metadata.tableType().name()).upper() == "VIEW"


def _view_definition(spark: SparkSession, ref: TableRef, comment: str, properties: Mapping[str, str]) -> Any | None:
    """A JVM ``CatalogTable`` of a view of ``SELECT 1 AS one``, built by ``CatalogTable.apply`` with
    its default arguments but for the identifier, type, storage and schema (its first four) and the
    properties, view text and comment (its 12th, 14th and 15th, where Spark 3.5 to 4.3 have them; a
    field added since came after). None where the signature is not that: the caller runs the SQL."""
    jvm: Any = spark._jvm
    methods = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.catalog.CatalogTable").getMethods()
    applies = [m for m in methods if m.getName() == "apply"]
    if not applies:
        return None
    widest = max(applies, key=lambda m: m.getParameterCount())
    types = [t.getName() for t in widest.getParameterTypes()]
    if len(types) < 15 or (types[11], types[13], types[14]) != (_SCALA_MAP, _SCALA_OPTION, _SCALA_OPTION):
        return None
    catalog = jvm.org.apache.spark.sql.catalyst.catalog
    companion = catalog.CatalogTable
    try:
        args = [getattr(companion, f"apply$default${i + 1}")() for i in range(4, len(types))]
    except Exception:  # noqa: BLE001 - no defaults to build it from: the statement then
        return None
    merged = jvm.java.util.HashMap()
    for key, value in properties.items():
        merged.put(key, value)
    args = [
        jvm.org.apache.spark.sql.catalyst.TableIdentifier(ref.table, jvm.scala.Some(ref.database)),
        catalog.CatalogTableType.VIEW(),
        catalog.CatalogStorageFormat.empty(),
        jvm.org.apache.spark.sql.types.DataType.fromJson(_VIEW_SCHEMA),
        *args,
    ]
    args[11] = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(merged)
    args[13], args[14] = jvm.scala.Some(_VIEW_QUERY), jvm.scala.Some(comment)
    return companion.apply(*args)


def _drop_by_sql(spark: SparkSession, ref: TableRef) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {ref.quoted} PURGE")


def _with_field(case_class: Any, current: Any, new: Any) -> Any:
    """A copy of a JVM case class with the first field equal to ``current`` replaced by ``new``.

    Found by value, not by position or name: the field list differs between Spark versions, Scala
    2.12 (Spark 3.5) has no field names, and py4j cannot pass Scala's named arguments. The fields
    replaced here come before any other field that could be equal (``properties`` before
    ``ignoredProperties``, ``storage.locationUri`` first)."""
    fields = [case_class.productElement(i) for i in range(case_class.productArity())]
    for i, value in enumerate(fields):
        if current.equals(value):
            fields[i] = new
            return case_class.copy(*fields)
    raise RuntimeError(f"{case_class.getClass().getName()} has no such field")


class _Values:
    """JVM CatalogTablePartitions' values, in ``columns`` order. The spec's keys are the table's
    partition columns as the metastore spells them; they are matched to ``columns`` ignoring case
    once, on the first partition (a table's partitions share them), then read by key."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.keys: list[str] | None = None

    def __call__(self, partition: Any) -> tuple[str, ...]:
        spec = partition.spec()
        if self.keys is None:
            spelled: dict[str, str] = {}
            keys = spec.keysIterator()
            while keys.hasNext():
                key = str(keys.next())
                spelled[key.lower()] = key
            self.keys = [spelled[c.lower()] for c in self.columns]
        return tuple(str(spec.apply(key)) for key in self.keys)


class _Relocator:
    """Points a listed JVM CatalogTablePartition at a new location by setting its storage's
    ``locationUri`` field. Copying the partition's two case classes through py4j took ~30 round
    trips a partition: 2.3 s of a 1,000-partition switch's 4.5 s, measured, the rest being the
    metastore's ``alter_partitions``. Setting the field takes one. The listing's objects are the
    caller's own (the external catalog converts them from the metastore's answer on every call),
    so nothing else sees them change."""

    def __init__(self, jvm: Any) -> None:
        self.some = jvm.scala.Some
        self.to_uri = jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.stringToURI
        self.field: Any = None

    def __call__(self, partition: Any, location: str) -> Any:
        storage = partition.storage()
        if self.field is None:
            self.field = storage.getClass().getDeclaredField("locationUri")
            self.field.setAccessible(True)
        self.field.set(storage, self.some(self.to_uri(location)))
        return partition


def _location_reader(jvm: Any) -> Callable[[Any], str]:
    """A JVM CatalogTablePartition's location as a path, not a URI: ``ds=a%2Fb`` on disk is
    ``ds=a%252Fb`` in the URI."""
    to_string = jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.URIToString  # new Path(uri).toString
    return lambda partition: str(to_string(partition.location()))
