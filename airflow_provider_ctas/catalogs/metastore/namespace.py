"""The metastore a table lives in, named as OpenLineage's naming spec names a Hive metastore
(``hive://host:port``): the namespace of lineage datasets and of ``hive://`` asset URIs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

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
