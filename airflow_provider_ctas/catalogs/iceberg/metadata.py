"""Iceberg's Java catalog and table metadata, reached through the driver's JVM (py4j).

Every change this provider makes to a target's metadata is one ``TableOperations.commit(base,
new)``. The Hive and JDBC catalogs swap the metadata pointer only if it still is ``base`` (the
Hive catalog checks the metastore's ``metadata_location`` under a lock, or with an
expected-parameter ``alter_table`` when locks are off; the JDBC catalog in one conditional
``UPDATE``; the Glue catalog re-reads the table's ``metadata_location``, then updates it with the
Glue table version it read, which Glue refuses once another update took that version), so
preconditions read from ``base`` hold at the instant of the swap. A REST catalog
checks only the requirements the client derives from the change (refs, schema, spec, never
properties): what must hold there is expressed as a ref change (``branch_ref(asserted=True)``).
Iceberg's own update classes re-apply themselves on a refreshed base when a commit conflicts,
which would skip our preconditions; hence the explicit ``TableMetadata`` builder.

The catalog is built from the Spark catalog's own options but without Spark's table cache, so
every read here sees the metastore's current state.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core.comments import Comments
from airflow_provider_ctas.core.errors import (
    CatalogUnavailableError,
    InvalidInputError,
    PublishError,
    UnsupportedTargetError,
)
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.markers import TARGET, TXN_ID
from airflow_provider_ctas.spark.engine import is_connect
from airflow_provider_ctas.spark.errors import first_line
from airflow_provider_ctas.spark.runtime import require_runtime

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
COMMIT_ATTEMPTS = 5
ASSERTED_REF_AGE_MS = 86_400_000
REFRESH_ATTEMPTS = 6
CATALOG_TYPES = ("hive", "rest", "jdbc", "glue")
SERVICE_TYPES = {"rest": "REST", "jdbc": "JDBC"}
"""Catalogs that are a service the driver connects to as it opens the catalog."""
OUTCOME_UNKNOWN = (
    "CommitStateUnknownException",
    # A REST catalog's transport failures and 5xx answers: the request may have been applied.
    "RESTException",
    "ServiceFailureException",
    "ServiceUnavailableException",
)
_NOT_FOUND = ("NoSuchTableException", "NoSuchIcebergTableException", "NoSuchObjectException")


def _without_secrets(uri: str) -> str:
    """A catalog URL as messages show it: no user information, no query (a JDBC URL may carry a password)."""
    scheme, _, rest = uri.partition("://")
    return f"{scheme}://{rest.rsplit('@', 1)[-1].split('?', 1)[0]}" if rest else uri.split("?", 1)[0]


class CommitUnknown(PublishError):
    """The catalog took the commit but did not say whether it applied it (a timeout, a 5xx, a lost
    connection): the caller re-reads the table and decides, it never guesses."""


def java_class(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    return str(java.getClass().getName()) if java is not None else type(exc).__name__


class IcebergCatalog:
    def __init__(self, spark: SparkSession, name: str) -> None:
        if is_connect(spark):
            raise UnsupportedTargetError(
                "Iceberg tables publish through Iceberg's Java API inside the Spark driver; use a "
                "spark-submit connection (conn_type spark), not Spark Connect"
            )
        self.spark, self.name = spark, name
        session: Any = spark  # the py4j handles are private attributes of a classic session
        self.jvm: Any = session._jvm
        prefix = f"spark.sql.catalog.{name}"
        # Session settings over the application's (RuntimeConfig.getAll is Spark 4.0+).
        settings = getattr(spark.conf, "getAll", None) or dict(spark.sparkContext.getConf().getAll())
        conf = {str(k): str(v) for k, v in settings.items()}
        impl = conf.get(prefix)
        example = f"{prefix}={SPARK_CATALOG_CLASS}, {prefix}.type=hive, {prefix}.uri=thrift://<metastore>:9083"
        if impl is None:
            raise InvalidInputError(f"catalog {name!r} is not configured; set in the operator's conf: {example}")
        if impl != SPARK_CATALOG_CLASS:
            raise UnsupportedTargetError(f"catalog {name!r} is {impl}; the Iceberg strategy serves {example}")
        options = {k[len(prefix) + 1 :]: v for k, v in conf.items() if k.startswith(prefix + ".")}
        self.type = options.get("type", "hive")
        self.options = options
        if self.type not in CATALOG_TYPES or "catalog-impl" in options:
            raise UnsupportedTargetError(
                f"catalog {name!r} is type={options.get('type')!r}"
                f"{' with catalog-impl' if 'catalog-impl' in options else ''}; the Iceberg strategy serves a Hive "
                f"metastore ({prefix}.type=hive), a REST catalog ({prefix}.type=rest, {prefix}.uri=<its URL>), a "
                f"JDBC catalog ({prefix}.type=jdbc, {prefix}.uri=jdbc:postgresql://...) "
                f"or AWS Glue ({prefix}.type=glue)"
            )
        service = SERVICE_TYPES.get(self.type)
        if service and not options.get("uri"):
            raise InvalidInputError(f"catalog {name!r} is a {service} catalog without a URL; set {prefix}.uri")
        require_runtime(spark, SPARK_CATALOG_CLASS, "Iceberg", "the jar iceberg-spark-runtime-<spark minor>_2.13")
        hadoop_conf = session._jsc.hadoopConfiguration()
        fallback = hadoop_conf.get("hive.metastore.uris") if self.type == "hive" else None
        self.uri = str(options.get("uri") or fallback or "")
        if service:  # what the XCom, lineage and messages show of it
            self.uri = _without_secrets(self.uri)
        try:
            self.catalog = self.jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(name, options, hadoop_conf)
        except Exception as exc:
            if service is None:
                raise
            # A REST catalog asks its server for its configuration as it starts; a JDBC one connects.
            settings = f"{prefix}.credential or {prefix}.token" if self.type == "rest" else f"{prefix}.jdbc.user"
            raise CatalogUnavailableError(
                f"the {service} catalog {name!r} at {_without_secrets(self.uri)} did not answer ({first_line(exc)}); "
                f"check {prefix}.uri and its credentials ({settings})"
            ) from exc

    def check_publish_by_rename(self) -> None:
        """A new Iceberg table is published by a catalog rename, which the REST specification makes
        optional: a REST catalog that does not offer it is refused before any data is written. The
        probe renames a table that does not exist, so it changes nothing either way."""
        if self.type != "rest":
            return
        missing = self.jvm.org.apache.iceberg.catalog.TableIdentifier.parse("__ctas_rename_probe.absent")
        try:
            self.catalog.renameTable(missing, missing)
        except Exception as exc:
            name = java_class(exc)
            if name.endswith("UnsupportedOperationException"):
                raise UnsupportedTargetError(
                    f"the REST catalog {self.name!r} does not offer renaming tables, which publishing a new Iceberg "
                    "table needs; create the table once (empty) by other means, then use mode='replace'"
                ) from exc
            if not name.endswith(("NoSuchTableException", "NoSuchNamespaceException")):
                raise CatalogUnavailableError(
                    f"the REST catalog {self.name!r} at {self.uri} failed a rename check: {first_line(exc)}"
                ) from exc

    def lineage_uri(self, database: str) -> str:
        """What names this catalog in lineage and asset URIs: its URL, or for Glue the Data Catalog's
        ARN prefix (``arn:aws:glue:<region>:<catalog id>``, OpenLineage's naming for Glue), its
        region and catalog id as Glue returns them for the database (the catalog id is ``glue.id``
        or, unset, the caller's account).

        The question goes through the catalog's own Glue client (its region, endpoint and
        credentials settings); py4j cannot call Iceberg's client factory, whose methods name SDK
        modules (DynamoDB) a Glue catalog does not need."""
        if self.type != "glue":
            return self.uri
        field = self.catalog.getClass().getDeclaredField("glue")
        field.setAccessible(True)
        client = field.get(self.catalog)
        request = self.jvm.software.amazon.awssdk.services.glue.model.GetDatabaseRequest.builder().name(database)
        if self.options.get("glue.id"):
            request = request.catalogId(self.options["glue.id"])
        try:
            catalog_id = str(client.getDatabase(request.build()).database().catalogId())
            region = str(client.serviceClientConfiguration().region().id())
        except Exception as exc:
            raise CatalogUnavailableError(
                f"AWS Glue did not answer for catalog {self.name!r}: {first_line(exc)}"
            ) from exc
        return f"arn:aws:glue:{region}:{catalog_id}"

    def _ident(self, ref: TableRef) -> Any:
        # ``of`` is varargs, which py4j cannot call; the parts are validated names, so no dot inside.
        return self.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"{ref.database}.{ref.table}")

    def _namespace(self, database: str) -> Any:
        return self.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"{database}.t").namespace()

    def namespace_exists(self, database: str) -> bool:
        return bool(self.catalog.namespaceExists(self._namespace(database)))

    def table_names(self, database: str) -> list[str]:
        """The Iceberg tables of a namespace (the Hive catalog lists no other tables)."""
        return sorted(str(ident.name()) for ident in self.catalog.listTables(self._namespace(database)))

    def load(self, ref: TableRef) -> Any | None:
        """The table, or None when there is none (or it is not an Iceberg table)."""
        try:
            return self.catalog.loadTable(self._ident(ref))
        except Exception as exc:
            if java_class(exc).rsplit(".", 1)[-1] in _NOT_FOUND:
                return None
            raise

    def current(self, ref: TableRef) -> Any | None:
        """The table's current metadata, or None when there is no such table."""
        table = self.load(ref)
        return None if table is None else table.operations().refresh()

    def rename(self, source: TableRef, target: TableRef) -> None:
        self.catalog.renameTable(self._ident(source), self._ident(target))

    def drop(self, ref: TableRef) -> str | None:
        """Drops a staging table this provider created (its markers checked by the caller) with its
        files; returns a warning when its directory could not be removed.

        Iceberg's purge deletes the files its metadata lists; a killed write's data files are listed
        nowhere, so the table's own directory goes too: only one named after the table, which its
        reserved name makes this try's. A table whose ``write.data.path`` is elsewhere (a reshaping
        replace's staging writes where its target's data lives: its files are the target's once
        published) is dropped without purge; its unpublished files are left to Iceberg's
        ``remove_orphan_files``."""
        table = self.load(ref)
        if table is None:
            return None
        location, io = str(table.location()).rstrip("/"), table.io()
        if self._published_from(ref, table, location):
            self.catalog.dropTable(self._ident(ref), False)
            return None
        data_path = properties(table.operations().current()).get("write.data.path", "").rstrip("/")
        keeps_files = bool(data_path) and not data_path.startswith(location + "/")
        if not self.catalog.dropTable(self._ident(ref), not keeps_files) or location.rsplit("/", 1)[-1] != ref.table:
            return None
        try:
            io.deletePrefix(location)  # FileIOs that list (Hadoop, S3, GCS, ADLS) support it
        except Exception as exc:  # noqa: BLE001 - the table is gone; what is left is files under its reserved name
            return f"{location}: not removed ({first_line(exc)})"
        return None

    def _published_from(self, ref: TableRef, staging: Any, location: str) -> bool:
        """Whether the staging table's files are its target's: a catalog whose rename copies the
        entry, then drops the old one (Glue), leaves both when it stops in between, and purging the
        staging then would delete the published table's data. Only the entry goes then."""
        target = properties(staging.operations().current()).get(TARGET)
        if not target or target.count(".") != 2:
            return False
        published = self.load(TableRef.parse(target, "the staging table's target", named_catalog=True))
        return published is not None and str(published.location()).rstrip("/") == location

    def commit(self, table: Any, change: Callable[[Any, Any], Any | None]) -> Any | None:
        """Swap the table's metadata for ``change(base, builder)``'s, re-reading ``base`` on a conflict.

        ``change`` checks its preconditions on ``base`` (raising when they fail) and returns the
        builder with its changes, or None when ``base`` already needs none. Returns the new metadata.
        """
        ops = table.operations()
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            base = ops.refresh()
            builder = change(base, self.jvm.org.apache.iceberg.TableMetadata.buildFrom(base))
            if builder is None:
                return None
            new = builder.build()
            try:
                ops.commit(base, new)
                return new
            except Exception as exc:
                name = java_class(exc)
                if name.endswith("CommitFailedException") and attempt < COMMIT_ATTEMPTS:
                    time.sleep(0.2 * attempt)
                    continue
                if name.rsplit(".", 1)[-1] in OUTCOME_UNKNOWN:
                    raise CommitUnknown(f"{table.name()}: the catalog did not say whether the commit applied") from exc
                raise PublishError(f"could not commit {table.name()}'s metadata ({name}): {first_line(exc)}") from exc
        raise AssertionError("unreachable")

    def refresh(self, table: Any, attempts: int = REFRESH_ATTEMPTS) -> Any:
        """The table's current metadata, asking again while the catalog does not answer."""
        for attempt in range(1, attempts + 1):
            try:
                return table.operations().refresh()
            except Exception:
                if attempt == attempts:
                    raise
                time.sleep(min(2.0 * attempt, 10.0))
        raise AssertionError("unreachable")

    def java_set(self, items: Iterable[str]) -> Any:
        result = self.jvm.java.util.HashSet()
        for item in items:
            result.add(item)
        return result

    def branch_ref(self, snapshot_id: int, asserted: bool = False) -> Any:
        """A branch at ``snapshot_id``. ``asserted`` gives it a retention no branch of ours has, so
        that setting it is a change: a REST commit then requires the branch to be at that snapshot
        on the server (``assert-ref-snapshot-id``), which is how a publish that also removes the
        branch proves it is still this try's."""
        builder = self.jvm.org.apache.iceberg.SnapshotRef.branchBuilder(snapshot_id)
        return (builder.maxRefAgeMs(ASSERTED_REF_AGE_MS) if asserted else builder).build()

    def with_comments(self, base: Any, builder: Any, comments: Comments) -> Any:
        """``builder`` that also gives the table ``comments`` where ``base`` differs (the table's
        ``comment`` property, its columns' ``doc``): in the same metadata swap as the publish."""
        schema = base.schema()
        fields = list(schema.columns())
        docs = {str(f.name()).lower(): str(f.doc()) for f in fields if f.doc() is not None}
        changes = comments.changes_to(Comments(table=properties(base).get("comment"), columns=docs))
        if changes.table is not None:
            builder = builder.setProperties({"comment": changes.table})
        if not changes.columns:
            return builder
        nested = self.jvm.org.apache.iceberg.types.Types.NestedField
        columns = self.jvm.java.util.ArrayList()
        for f in fields:
            doc = changes.columns.get(str(f.name()).lower())
            columns.add(f if doc is None else getattr(nested, "from")(f).withDoc(doc).build())
        documented = self.jvm.org.apache.iceberg.Schema(columns, schema.identifierFieldIds())
        return builder.setCurrentSchema(documented, base.lastColumnId())


def properties(metadata: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(metadata.properties()).items()}


def refs(metadata: Any) -> dict[str, int]:
    """Branch and tag names with the snapshot each points at."""
    return {str(name): int(ref.snapshotId()) for name, ref in dict(metadata.refs()).items()}


def summary(metadata: Any, snapshot_id: int) -> Mapping[str, str]:
    snapshot = metadata.snapshot(snapshot_id)
    return {} if snapshot is None else {str(k): str(v) for k, v in dict(snapshot.summary()).items()}


def parent_id(metadata: Any, snapshot_id: int) -> int | None:
    snapshot = metadata.snapshot(snapshot_id)
    parent = None if snapshot is None else snapshot.parentId()
    return None if parent is None else int(parent)


def main_snapshot(metadata: Any) -> int | None:
    snapshot = metadata.currentSnapshot()
    return None if snapshot is None else int(snapshot.snapshotId())


def ancestor_summary(metadata: Any, txn_id: str) -> dict[str, str] | None:
    """The summary of the newest snapshot in ``main``'s history that transaction ``txn_id`` wrote,
    or None: how a retry finds its earlier try's partition overwrite after other writers moved on."""
    snapshot = metadata.currentSnapshot()
    while snapshot is not None:
        found = {str(k): str(v) for k, v in dict(snapshot.summary()).items()}
        if found.get(TXN_ID) == txn_id:
            return found
        parent = snapshot.parentId()
        snapshot = None if parent is None else metadata.snapshot(parent)
    return None


def partitioning(metadata: Any) -> list[tuple[str, str]]:
    """The table's partition fields, each as ``partition_by`` spells it (``ds``, ``days(ts)``,
    ``bucket(16, id)``) with the field's name in the partition struct; a transform this provider
    does not know (``void``, a custom one) keeps Iceberg's own spelling, so it never compares equal."""
    return partitioning_of(metadata.spec(), metadata.schema())


def partitioning_of(spec: Any, schema: Any) -> list[tuple[str, str]]:
    """``partitioning`` of ``spec`` on ``schema``."""
    fields = []
    for field in spec.fields():
        transform, column = str(field.transform()), str(schema.findColumnName(field.sourceId())).lower()
        width = re.fullmatch(r"(bucket|truncate)\[(\d+)\]", transform)
        if transform == "identity":
            spelled = column
        elif transform in ("year", "month", "day", "hour"):
            spelled = f"{transform}s({column})"
        elif width:
            spelled = f"{width.group(1)}({width.group(2)}, {column})"
        else:
            spelled = f"{transform} of {column}"
        fields.append((spelled, str(field.name())))
    return fields
