"""The fence: only the try whose markers its staging carries may publish.

Checked before a publish (the staging is this try's) and re-checked right after it (a newer try can
revoke this one in between; the publish is then undone). A newer try revokes a staging table by
dropping it, and staging that is only a directory by marking its marker revoked.
"""

from __future__ import annotations

from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.identifiers import TableRef


def require_own_staging(ctx: RunContext) -> TableRef:
    """This try's staging, still carrying this try's markers (one catalog call or one file read)."""
    staging = ctx.staging_table
    if not still_own_staging(ctx):
        raise FencedError(
            f"the staging of try {ctx.table.try_number} ({ctx.staging_directory or staging}) is gone or "
            "revoked: a newer try of this task instance has taken over, so this try must not publish"
        )
    return staging


def still_own_staging(ctx: RunContext) -> bool:
    """The re-check right after a publish: one catalog call (properties only), as over Spark
    Connect each call is a round trip, or one read of the staging directory's marker."""
    if ctx.staging_directory is not None:
        marker = ctx.catalog.read_marker(ctx.staging_directory)
        return (
            marker is not None
            and marker.txn_id == ctx.table.txn_id
            and marker.try_number == ctx.table.try_number
            and marker.revoked_by is None
        )
    properties = ctx.catalog.properties(ctx.staging_table)
    return properties is not None and ownership.is_staging_of(properties, ctx.table.txn_id, ctx.table.try_number)


def revoked(ctx: RunContext) -> FencedError:
    return FencedError(f"a newer try took over while try {ctx.table.try_number} published; undone")
