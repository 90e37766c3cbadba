"""Asset events for published tables: downstream DAGs run when, and only when, a table was published.

A table's asset URI is ``hive://<metastore>/<database>/<table>``: the OpenLineage dataset the
operator's lineage names (namespace ``hive://host:port``, or ``hive://embedded`` for Spark's
embedded metastore; name ``database.table``), so asset events and lineage events join. The
provider registers the scheme (``sanitize_uri``, ``create_asset``, ``convert_asset_to_openlineage``).

``apache-airflow-providers-apache-hive`` registers ``hive`` too, and Airflow keeps the handler of
the provider whose package name sorts last (the install order does not matter): with both
installed, that provider's handler is used, and it keeps a URI as written. So the URIs this
provider emits are always in the canonical form (lower case, the port written out), the one both
handlers leave unchanged; ``create_asset`` builds it, and ``sanitize_uri`` warns about any other
form, which matches this provider's events only while its own handler is the active one.

Airflow emits an event for every concrete asset in a task's outlets whenever the task succeeds.
That is right only for modes where success means "published": ``create`` (fails if the table is
someone else's), ``replace`` and ``overwrite_partitions``. For ``create_if_not_exists`` (success
without publishing when the table exists) and for targets known only at run time, the outlet is an
``AssetAlias`` and the event is added only when this try published, or a retry found its own
earlier publish. Airflow 3.3 attaches partition keys to concrete assets only, not to alias events.
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.providers.common.compat.assets import Asset, AssetAlias

from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import Outcome, TwoPhaseTable

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Context

log = logging.getLogger(__name__)
SCHEME = "hive"
DEFAULT_METASTORE_PORT = 9083
EMBEDDED = "embedded"
ALWAYS_PUBLISHING_MODES = frozenset(mode.value for mode in Mode if mode.always_publishes)


class NonCanonicalAssetUriWarning(UserWarning):
    """A ``hive://`` asset URI that only this provider's handler normalizes (see the module docstring)."""


def _canonical(netloc: str, database: str, table: str) -> str:
    netloc = netloc.lower()
    if netloc != EMBEDDED and urlsplit(f"//{netloc}").port is None:
        netloc = f"{netloc.rstrip(':')}:{DEFAULT_METASTORE_PORT}"
    return f"{SCHEME}://{netloc}/{database.lower()}/{table.lower()}"


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's normalizer for ``hive://`` asset URIs: default port, lower-case names; a URI not
    already in that form gets a warning, since with the apache-hive provider installed it would stay
    as written and not match the events this provider emits."""
    if not uri.netloc:
        raise ValueError(
            "URI format hive:// must name the metastore: hive://host:port/database/table (or hive://embedded/...)"
        )
    parts = uri.path.split("/")
    if len(parts) != 3 or not all(parts[1:]):  # leading slash, database, table
        raise ValueError("URI format hive:// must contain a database and a table name: hive://host:port/database/table")
    canonical = urlsplit(_canonical(uri.netloc, parts[1], parts[2]))
    if canonical.netloc != uri.netloc or canonical.path != uri.path:
        warnings.warn(
            f"asset URI {uri.geturl()!r}: write {canonical.geturl()!r} (lower case, the port written out). "
            "This provider's hive:// handler normalizes it, but with apache-airflow-providers-apache-hive "
            "installed Airflow uses that provider's handler, which keeps URIs as written, and the asset "
            "would not match the table's events",
            NonCanonicalAssetUriWarning,
            stacklevel=2,
        )
    return uri._replace(scheme=SCHEME, netloc=canonical.netloc, path=canonical.path)


def create_asset(
    *, database: str, table: str, host: str = EMBEDDED, port: int | None = None, extra: dict[str, Any] | None = None
) -> Asset:
    """The asset of a table in a Hive metastore (``host='embedded'`` for Spark's embedded one), in
    the canonical form every ``hive://`` handler keeps: use it for a downstream DAG's schedule."""
    netloc = host if host == EMBEDDED or port is None else f"{host}:{port}"
    return Asset(uri=_canonical(netloc, database, table), extra=extra)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    """The OpenLineage dataset the operator's own lineage reports for the same table."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    parsed = urlsplit(asset.uri)
    _, database, table = parsed.path.split("/")
    return Dataset(namespace=f"{SCHEME}://{parsed.netloc}", name=f"{database}.{table}")


def table_asset(namespace: str, target: TableRef) -> Asset:
    """``namespace`` is a lineage namespace (``hive://host:port``), the metastore the table's catalog uses."""
    return Asset(uri=f"{namespace}/{target.database}/{target.table}")


def outlet_for(*, namespace: str | None, target: TableRef | None, mode: str, alias_name: str) -> Asset | AssetAlias:
    """A concrete asset when success always means published and the table is known at parse time;
    otherwise an alias resolved at run time. ``namespace`` and ``target`` are None when the target,
    mode or conf are templated."""
    if namespace is not None and target is not None and mode in ALWAYS_PUBLISHING_MODES:
        return table_asset(namespace, target)
    return AssetAlias(name=alias_name)


def event_extra(table: TwoPhaseTable) -> dict[str, Any]:
    publish = table.details.get("publish") or {}
    return {
        "row_count": table.details.get("row_count"),
        "txn_id": table.txn_id,
        "try_number": table.try_number,
        "outcome": table.outcome.value if table.outcome else None,
        "publish_mechanism": publish.get("mechanism") or table.details.get("publish_mechanism"),
        "partitions": list(publish.get("partitions") or []),
    }


def partition_keys(partitions: list[str]) -> list[str]:
    """Airflow's partition keys for Hive partition names: the value for one partition column
    (``ds=2024-01-01`` → ``2024-01-01``), the values in partition column order joined by ``|`` for
    several (``ds=2024-01-01/hr=3`` → ``2024-01-01|3``), as Airflow's ``ProductMapper`` splits them."""
    return ["|".join(part.partition("=")[2] for part in name.split("/")) for name in partitions]


def record_publish_event(context: Context, outlet: Asset | AssetAlias, namespace: str, table: TwoPhaseTable) -> bool:
    """Adds this try's asset event; returns whether there was a publish to announce."""
    if table.outcome not in (Outcome.PUBLISHED, Outcome.ALREADY_PUBLISHED):
        return False
    extra = event_extra(table)
    events = context["outlet_events"]
    if isinstance(outlet, AssetAlias):
        events[outlet].add(table_asset(namespace, table.target), extra=extra)
        return True
    if not outlet.uri.startswith(f"{namespace}/"):
        log.warning(
            "the table's asset %s names another metastore than the driver used (%s): set "
            "spark.hadoop.hive.metastore.uris in the operator's conf or spark-defaults.conf",
            outlet.uri,
            namespace,
        )
    accessor = events[outlet]
    accessor.extra.update(extra)
    if extra["partitions"]:
        accessor.add_partitions(partition_keys(extra["partitions"]))
    return True
