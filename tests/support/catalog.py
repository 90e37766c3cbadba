"""What a reader of the catalog and the warehouse sees; used to assert guarantees from outside."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.identifiers import sql_string_literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEBRIS = ("_temporary", ".spark-staging", ".hive-staging")


def fresh(spark: SparkSession) -> SparkSession:
    """A session with its own catalog cache, so each look sees the metastore as it is now."""
    return spark.newSession()


def described_comments(rows: Iterable[Mapping[str, Any]]) -> tuple[str | None, dict[str, str]]:
    """The table's comment and its columns' (those that have one), from ``DESCRIBE TABLE EXTENDED``."""
    columns: dict[str, str] = {}
    described: str | None = None
    in_columns = True
    for row in rows:
        name = (row["col_name"] or "").strip()
        if not name or name.startswith("#"):
            in_columns = False
        elif in_columns and row["comment"]:
            columns[name] = row["comment"]
        elif not in_columns and name == "Comment":
            described = row["data_type"]
    return described, columns


def comments(spark: SparkSession, qualified: str) -> tuple[str | None, dict[str, str]]:
    rows = fresh(spark).sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    return described_comments(r.asDict() for r in rows)


def table_exists(spark: SparkSession, qualified: str) -> bool:
    return bool(fresh(spark).catalog.tableExists(qualified))


def count(spark: SparkSession, qualified: str, where: str = "") -> int:
    condition = f" WHERE {where}" if where else ""
    return int(fresh(spark).sql(f"SELECT count(*) AS n FROM {qualified}{condition}").collect()[0]["n"])


def properties(spark: SparkSession, qualified: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in fresh(spark).sql(f"SHOW TBLPROPERTIES {qualified}").collect()}


def reserved_tables(spark: SparkSession, database: str) -> list[str]:
    rows = fresh(spark).sql(f"SHOW TABLES IN {database} LIKE '__ctas*'").collect()
    return [r["tableName"] for r in rows]


def database_dir(spark: SparkSession, database: str) -> Path:
    return Path(urlparse(fresh(spark).catalog.getDatabase(database).locationUri).path)


def location_uri(spark: SparkSession, qualified: str) -> str:
    rows = fresh(spark).sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    return str(next(r["data_type"] for r in rows if r["col_name"] == "Location"))


def location(spark: SparkSession, qualified: str) -> Path:
    return Path(urlparse(location_uri(spark, qualified)).path)


def live_locations_uris(spark: SparkSession, database: str) -> set[str]:
    """Every location a table of the database reads, as URIs: table locations and partition locations."""
    session = fresh(spark)
    names = [r["tableName"] for r in session.sql(f"SHOW TABLES IN {database}").collect() if not r["isTemporary"]]
    live = set()
    for name in names:
        qualified = f"{database}.{name}"
        live.add(location_uri(spark, qualified))
        live.update(partition_locations(spark, qualified).values())
    return live


def live_locations(spark: SparkSession, database: str) -> set[Path]:
    """Every directory a table of the database reads: table locations and partition locations."""
    return {Path(urlparse(uri).path) for uri in live_locations_uris(spark, database)}


def partition_locations(spark: SparkSession, qualified: str) -> dict[str, str]:
    """The partitions the metastore lists for a table (none if it is unpartitioned), with their locations."""
    session = fresh(spark)
    described = session.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    if not any(r["col_name"] == "# Partition Information" for r in described):
        return {}
    found = {}
    for row in session.sql(f"SHOW PARTITIONS {qualified}").collect():
        pairs = (p.split("=", 1) for p in row["partition"].split("/"))  # escaped as in a path: a%2Fb
        spec = ", ".join(f"{k} = {sql_string_literal(unquote(v))}" for k, v in pairs)
        rows = session.sql(f"DESCRIBE TABLE EXTENDED {qualified} PARTITION ({spec})").collect()
        found[row["partition"]] = next(r["data_type"] for r in rows if r["col_name"] == "Location")
    return found


def marker_text(path: Path) -> str | None:
    """A marker file's content; over Spark Connect a marker is a directory of text parts (newest wins)."""
    if path.is_file():
        return path.read_text()
    parts = sorted(path.glob("part-*"), key=lambda p: (p.stat().st_mtime, p.name)) if path.is_dir() else []
    return parts[-1].read_text() if parts else None


def retained_until(path: Path) -> datetime | None:
    """When a superseded version kept for readers may go (its record, README: superseded_retention)."""
    record = markers.SupersededRecord.parse(marker_text(path / markers.SUPERSEDED_FILE))
    return markers.parse_time(record.delete_after) if record else None


def kept_for_readers(path: Path) -> bool:
    """A superseded version within its retention, or a data root that holds nothing else."""
    due = retained_until(path)
    if due is not None:
        return due > datetime.now(UTC)
    children = [c for c in path.iterdir() if not c.name.startswith(("_", "."))] if path.is_dir() else []
    return bool(children) and all(kept_for_readers(c) for c in children)


def leftovers(spark: SparkSession, database: str) -> list[str]:
    """Staging tables, staging directories and write debris anywhere under the database.

    A reserved-name directory that a table points at (a replaced table's data) is not a leftover,
    nor is a superseded version still within its retention (kept for readers with older listings).
    """
    found = [f"table {name}" for name in reserved_tables(spark, database)]
    root = database_dir(spark, database)
    live = live_locations(spark, database)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            feeds_a_table = any(p == path or path in p.parents for p in live)
            if name.startswith(DEBRIS) or (
                name.startswith("__ctas_") and not feeds_a_table and not kept_for_readers(path)
            ):
                found.append(str(path.relative_to(root)))
    return sorted(found)
