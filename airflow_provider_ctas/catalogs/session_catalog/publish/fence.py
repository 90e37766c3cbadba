"""The fence (``core.requirements.AssertOwnStaging``): only the try whose markers its staging carries may publish.

Checked before a publish (the staging is this try's) and re-checked right after it (a newer try can
revoke this one in between; the publish is then undone). A newer try revokes a staging table by
dropping it, and staging that is only a directory by marking its marker revoked. What a newer try's
begin cannot revoke is staging an older try creates after it (the older try stalled inside its own
begin): before its publish a try also checks that no newer try has staging of its own.
"""

from __future__ import annotations

from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.requirements import AssertOwnStaging, Observed


def own_staging(ctx: RunContext) -> AssertOwnStaging:
    return AssertOwnStaging(ctx.table.txn_id, ctx.table.try_number, str(ctx.staging_directory or ctx.staging_table))


def observe_staging(ctx: RunContext) -> Observed:
    """One catalog call (properties only), as over Spark Connect each call is a round trip, or one
    read of the staging directory's marker."""
    if ctx.staging_directory is not None:
        ctx.staging_marker = ctx.catalog.read_marker(ctx.staging_directory)
        return Observed(marker=ctx.staging_marker)
    return Observed(properties=ctx.catalog.properties(ctx.staging_table))


def require_own_staging(ctx: RunContext) -> TableRef:
    """This try's staging, still carrying this try's markers."""
    own_staging(ctx).validate(observe_staging(ctx))
    return ctx.staging_table


def require_no_newer_try(ctx: RunContext) -> None:
    """No newer try of this transaction has begun: none has a staging directory beside this try's."""
    ctx.catalog.require_no_newer_try(ctx.table.target.database, ctx.table.txn_id, ctx.table.try_number)


def still_own_staging(ctx: RunContext) -> bool:
    """The re-check right after a publish."""
    return own_staging(ctx).holds(observe_staging(ctx))


def revoked(ctx: RunContext) -> FencedError:
    return FencedError(f"a newer try took over while try {ctx.table.try_number} published; undone")
