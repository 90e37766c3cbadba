"""The metastore a table lives in, named as OpenLineage's naming spec names a Hive metastore
(``hive://host:port``): the namespace of lineage datasets and of ``hive://`` asset URIs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit

METASTORE_URIS = "spark.hadoop.hive.metastore.uris"


def metastore_namespace(conf: Mapping[str, Any] | None, details: Mapping[str, Any] | None = None) -> str:
    """``hive://host:port`` of the metastore, as in OpenLineage's naming spec; ``hive://embedded``
    for Spark's embedded one. Once the driver ran, the URIs it reported using (``metastore_uris``:
    whatever configured it); before, ``spark.hadoop.hive.metastore.uris`` from the operator's
    ``conf``, then SPARK_CONF_DIR's spark-defaults.conf."""
    reported = (details or {}).get("metastore_uris")
    if isinstance(reported, str):
        return _namespace(reported)
    uris = (conf or {}).get(METASTORE_URIS)
    if not uris and (conf_dir := os.environ.get("SPARK_CONF_DIR")):
        uris = spark_defaults(Path(conf_dir, "spark-defaults.conf")).get(METASTORE_URIS)
    return _namespace(str(uris or ""))


def spark_defaults(path: Path) -> dict[str, str]:
    """A spark-defaults.conf as Spark reads it: ``java.util.Properties`` rules (``key value``,
    ``key=value``, ``key: value``, tabs, comments, continued lines, escapes), values trimmed."""
    import javaproperties  # Airflow side only: the driver (which has no such package) never reads this file

    if not path.exists():
        return {}
    with path.open(encoding="utf-8") as handle:
        return {key: value.strip() for key, value in javaproperties.load(handle).items()}


def _namespace(uris: str) -> str:
    if not uris.strip():
        return "hive://embedded"
    first = urlparse(uris.split(",")[0].strip())
    return f"hive://{first.hostname}:{first.port or 9083}"


def service_namespace(uri: str) -> str | None:
    """A REST catalog's URL, or a JDBC catalog's database (``jdbc:postgresql://host:port/db``),
    without credentials or query; None for a metastore's ``thrift://`` URIs."""
    uri = uri.strip()
    prefix = ""
    if uri.startswith("jdbc:") and "://" not in uri:  # jdbc:sqlite:/path: a file, named as it is
        return uri.split("?", 1)[0]
    if uri.startswith("jdbc:"):
        prefix, uri = uri.split("://", 1)[0].rsplit(":", 1)[0] + ":", uri[len("jdbc:") :]
    parsed = urlsplit(uri)
    defaults = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306}
    if parsed.scheme not in defaults or not parsed.hostname or (prefix == "") != (parsed.scheme in ("http", "https")):
        return None
    port = parsed.port or defaults[parsed.scheme]
    return f"{prefix}{parsed.scheme}://{parsed.hostname}:{port}{parsed.path.rstrip('/')}"


def path_dataset(uri: str) -> tuple[str, str]:
    """A path's dataset as OpenLineage's naming spec names files: ``file`` and the absolute path;
    ``s3://bucket`` (for ``s3a://`` too), ``gs://bucket`` and the key; ``hdfs://host:port``,
    ``abfss://container@account...`` and the path."""
    parsed = urlsplit(uri)
    scheme = {"s3a": "s3", "s3n": "s3"}.get(parsed.scheme, parsed.scheme or "file")
    if scheme == "file" or not parsed.netloc:
        return "file", parsed.path or uri
    path = parsed.path.lstrip("/") if scheme in ("s3", "gs") else parsed.path
    return f"{scheme}://{parsed.netloc}", path


def jdbc_dataset(url: str, table: str) -> tuple[str, str]:
    """A JDBC source as OpenLineage's naming spec names it: ``postgres://host:port`` and
    ``database.schema.table`` (schema ``public`` when the table names none), ``mysql://host:port``
    and ``database.table``; any other database by its URL without ``jdbc:``, credentials or
    settings, and the table as given."""
    bare = url.strip().removeprefix("jdbc:")
    parsed = urlsplit(bare)
    database = parsed.path.strip("/")
    if parsed.scheme in ("postgresql", "postgres") and parsed.hostname:
        qualified = table if "." in table else f"public.{table}"
        return f"postgres://{parsed.hostname}:{parsed.port or 5432}", f"{database}.{qualified}"
    if parsed.scheme in ("mysql", "mariadb") and parsed.hostname:
        return f"mysql://{parsed.hostname}:{parsed.port or 3306}", f"{database}.{table}"
    if parsed.hostname:
        authority = parsed.hostname + (f":{parsed.port}" if parsed.port else "")
        return f"{parsed.scheme}://{authority}{parsed.path}".rstrip("/"), table
    bare = bare.split(";", 1)[0].split("?", 1)[0]
    if "@" in bare:  # oracle:thin:user/password@host:port:sid: never the credentials
        return f"{bare.split(':', 1)[0]}://{bare.rsplit('@', 1)[1]}", table
    return bare, table


def catalog_namespace(conf: Mapping[str, Any], catalog: str) -> str:
    """The lineage namespace of the tables of Spark catalog ``catalog`` (an Iceberg ``SparkCatalog``
    as ``spark.sql.catalog.<catalog>.*`` configures it): its REST or JDBC service, else its Hive
    metastore (its ``uri``, else the session's)."""
    uri = str(conf.get(f"spark.sql.catalog.{catalog}.uri") or "")
    if named := service_namespace(uri):
        return named
    return metastore_namespace({METASTORE_URIS: uri} if uri else conf, None)


GLUE_ARN = "arn:aws:glue:"


def dataset_name(namespace: str, database: str, table: str) -> str:
    """A table's OpenLineage dataset name in ``namespace``: ``table/<database>/<table>`` in a Glue
    Data Catalog (``arn:aws:glue:...``), ``database.table`` in a metastore or any other catalog."""
    return f"table/{database}/{table}" if namespace.startswith(GLUE_ARN) else f"{database}.{table}"
