"""What a reader of the bucket sees: objects, incomplete multipart uploads, copies in the request log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core import markers
from tests.support.catalog import DEBRIS, fresh, live_locations_uris, location_uri, reserved_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ctas_devstack.s3 import S3Server

FLAKY_RETRIES = {"retry.limit": "2", "retry.interval": "100ms", "retry.throttle.limit": "2",
                 "retry.throttle.interval": "100ms", "attempts.maximum": "2"}  # fmt: skip
"""S3A's retries (``fs.s3a.bucket.<bucket>.<key>``) for a bucket behind a fault proxy, cut so that a
store that stays down fails a call in seconds (its defaults retry a throttled call for minutes
first, which would only make a test slow)."""


def keys(server: S3Server, bucket: str, prefix: str) -> list[str]:
    client, found, token = server.client(), [], None
    while True:
        extra: dict[str, str] = {"ContinuationToken": token} if token else {}
        page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, **extra)
        found += [item["Key"] for item in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return found
        token = page["NextContinuationToken"]


def uploads(server: S3Server, bucket: str, prefix: str) -> list[str]:
    """Incomplete multipart uploads: what a killed writer can leave that no listing of objects shows."""
    page = server.client().list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return [f"upload {u['Key']}" for u in page.get("Uploads", [])]


def copies_since(server: S3Server, first: int) -> list[dict[str, Any]]:
    """Server-side copies (what a rename on S3 is made of) among the requests after the first ``first``."""
    return [r for r in server.requests()[first:] if r.get("copy_source")]


def _retained(server: S3Server, bucket: str, directory: str) -> bool:
    body = server.client().get_object(Bucket=bucket, Key=f"{directory}/{markers.SUPERSEDED_FILE}")["Body"].read()
    record = markers.SupersededRecord.parse(body.decode())
    due = markers.parse_time(record.delete_after) if record else None
    return due is not None and due > datetime.now(UTC)


def s3_leftovers(spark: SparkSession, server: S3Server, bucket: str, database: str) -> list[str]:
    """Staging tables, and under the database's prefix: staging directories no table reads (unless a
    superseded version still within its retention), write debris, incomplete uploads."""
    found = [f"table {name}" for name in reserved_tables(spark, database)]
    prefix = f"{database}.db/"
    live = {uri.split(f"{bucket}/", 1)[-1].rstrip("/") for uri in live_locations_uris(spark, database)}
    all_keys = keys(server, bucket, prefix)
    directories = {"/".join(k.split("/")[:2]) for k in all_keys if k.count("/") >= 2}
    for directory in sorted(directories):
        name = directory.split("/", 1)[1]
        fed = any(p == directory or p.startswith(directory + "/") for p in live)
        superseded = f"{directory}/{markers.SUPERSEDED_FILE}" in all_keys and _retained(server, bucket, directory)
        if name.startswith("__ctas_") and not fed and not superseded:
            found.append(directory)
    found += sorted({k for k in all_keys if any(part.startswith(DEBRIS) for part in k.split("/"))})
    return found + uploads(server, bucket, prefix)


def key_of(spark: SparkSession, qualified: str, bucket: str) -> str:
    """The table's location as a key prefix in ``bucket``."""
    return location_uri(spark, qualified).split(f"{bucket}/", 1)[-1].rstrip("/")


def table_type(spark: SparkSession, qualified: str) -> str:
    rows = fresh(spark).sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    return str(next(r["data_type"] for r in rows if r["col_name"] == "Type"))
