"""What every publish mechanism is handed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_ctas.catalogs.metastore.catalog import TableInfo
from airflow_provider_ctas.catalogs.session_catalog.plan import Plan
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.protocol import PhaseReport
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.session_catalog.context import RunContext


@dataclass(frozen=True)
class Publication:
    plan: Plan
    target_info: TableInfo | None
    """The target as commit found it, right before publishing (None: it does not exist)."""
    staging: TableRef
    """This try's staging table; the fence has just checked it still carries this try's markers."""
    provenance: dict[str, str]
    report: PhaseReport
    staged_partitions: Mapping[tuple[str, ...], str] | None = None
    """Where the staged partitions' data is, when no staging table says so: staging that is only a
    directory, or a managed staging table released (``partitions.release_managed_staging``); None:
    ask the staging table."""


def applied(ctx: RunContext, what: str, exc: BaseException, done: Callable[[], bool]) -> bool:
    """Whether a publishing metastore call that raised was applied all the same: its answer was lost
    (a timeout, a dropped connection), the client sent it again, and the metastore refused the
    second one because the first had applied. The catalog, read again, decides (``done``); when it
    cannot be read either, the call counts as not applied and the caller's recovery runs."""
    try:
        shown = done()
    except Exception as read:  # noqa: BLE001 - an unreadable catalog decides nothing
        ctx.log.warning(f"{what} failed ({first_line(exc)}) and the metastore cannot be read now ({first_line(read)})")
        return False
    if shown:
        ctx.log.warning(f"the metastore did not confirm {what} ({first_line(exc)}); it shows it done, going on")
        ctx.details.setdefault("unconfirmed_calls", []).append(what)
    return shown


def renamed_in(ctx: RunContext, staging: TableRef) -> bool:
    """Staging is gone and the target is this try's: its rename to the target happened."""
    info = ctx.catalog.table_info(ctx.table.target)
    renamed = info is not None and ctx.published_try(info) == ctx.table.try_number
    return renamed and ctx.catalog.table_info(staging) is None
