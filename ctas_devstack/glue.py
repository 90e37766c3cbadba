"""AWS Glue's Data Catalog on 127.0.0.1 for development and tests: moto's Glue, served by the same
process as the S3 server (``s3.py``), with the one check of Glue's that moto leaves out.

Iceberg's ``GlueCatalog`` commits a table by reading the Glue table, checking that its
``metadata_location`` is the base the commit was built on, then ``UpdateTable`` with the
``VersionId`` it read: AWS Glue refuses that update with ``ConcurrentModificationException`` when
another update took the version in between (optimistic locking). moto 5 applies every
``UpdateTable`` without looking at ``VersionId``, so a test on plain moto could not see a lost
race. ``enforce_version_ids`` adds the check, as AWS documents it, under one lock per server.

What Glue itself cannot do is rename a table: Iceberg's ``renameTable`` on Glue creates the new
entry (same metadata), then drops the old one without purging; ``IcebergCatalog.drop`` never purges
a staging table whose files its target now uses.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ctas_devstack.s3 import ACCESS_KEY, SECRET_KEY

REGION = "us-east-1"
ACCOUNT = "123456789012"
"""moto's default account: the catalog id Glue reports for its databases."""
SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"


def enforce_version_ids() -> None:
    """Make moto's ``UpdateTable`` refuse a ``VersionId`` that is not the table's current one."""
    from moto.core.exceptions import JsonRESTError
    from moto.glue.responses import GlueResponse

    lock = threading.Lock()
    update_table = GlueResponse.update_table

    def checked(self: Any) -> Any:
        expected = self.parameters.get("VersionId")
        with lock:
            if expected is not None:
                database, name = self.parameters.get("DatabaseName"), self.parameters["TableInput"]["Name"]
                current = str(self.glue_backend.get_table(database, name)._current_version)
                if str(expected) != current:
                    raise JsonRESTError(
                        "ConcurrentModificationException",
                        f"Update table failed due to concurrent modifications: version {expected} is not {current}",
                    )
            return update_table(self)

    GlueResponse.update_table = checked  # type: ignore[method-assign]


def glue_request(environ: dict[str, Any]) -> dict[str, Any] | None:
    """For the request log: a Glue request's operation and, for ``UpdateTable``, the ``VersionId``
    it sent (the body is read and put back for moto)."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if not target.startswith("AWSGlue."):
        return None
    import io

    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    operation = target.split(".", 1)[1]
    entry: dict[str, Any] = {"glue": operation}
    if operation == "UpdateTable":
        entry["version_id"] = json.loads(body or b"{}").get("VersionId")
    return entry


def catalog_conf(name: str, endpoint: str, warehouse: str) -> dict[str, str]:
    """What a Spark session sets for an Iceberg catalog ``name`` on this Glue (the runtime jar and
    the AWS SDK's glue module are the caller's). Credentials are not here: the AWS SDK reads them
    from the environment (``credentials_env``), as from an instance profile in production."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: SPARK_CATALOG_CLASS,
        f"{prefix}.type": "glue",
        f"{prefix}.warehouse": warehouse,
        f"{prefix}.glue.endpoint": endpoint,
        f"{prefix}.client.region": REGION,
        f"{prefix}.s3.endpoint": endpoint,
        f"{prefix}.s3.path-style-access": "true",
    }


def credentials_env() -> dict[str, str]:
    """The AWS SDK's environment for the server's fixed credentials."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}
