"""The fence: only the try whose markers the staging table carries may publish.

Checked before a publish (the staging table is this try's) and re-checked right after it (a newer
try can revoke this one in between; the publish is then undone).
"""

from __future__ import annotations

from airflow_provider_ctas.catalogs.session_catalog import ownership
from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.identifiers import TableRef


def require_own_staging(ctx: RunContext) -> TableRef:
    """This try's staging table, still carrying this try's markers (one catalog call)."""
    staging = ctx.table.staging_table()
    if not still_own_staging(ctx):
        raise FencedError(
            f"staging table {staging} of try {ctx.table.try_number} is gone: a newer try of this task "
            "instance has taken over, so this try must not publish"
        )
    return staging


def still_own_staging(ctx: RunContext) -> bool:
    """The re-check right after a publish: one catalog call (properties only), as over Spark
    Connect each call is a round trip."""
    properties = ctx.catalog.properties(ctx.table.staging_table())
    return properties is not None and ownership.is_staging_of(properties, ctx.table.txn_id, ctx.table.try_number)


def revoked(ctx: RunContext) -> FencedError:
    return FencedError(f"a newer try took over while try {ctx.table.try_number} published; undone")
