"""What a try removes of its own and of earlier tries of its transaction: staging tables (their
markers checked first) and branches (with the fences that name them, in one metadata swap)."""

from __future__ import annotations

from typing import Any

from airflow_provider_ctas.catalogs.iceberg import fence
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.table import branch_try
from airflow_provider_ctas.core import markers


def clean_tries(run: IcebergRun, up_to: int) -> list[str]:
    return drop_staging(run, up_to) + drop_branches(run, up_to)


def drop_staging(run: IcebergRun, up_to: int) -> list[str]:
    """Staging tables of tries ``<= up_to`` of this transaction, each checked for our markers."""
    catalog, table, touched = run.catalog, run.table, []
    for try_number in range(1, up_to + 1):
        staging = table.staging_table(try_number)
        loaded = catalog.load(staging)
        if loaded is None:
            continue
        props = md.properties(loaded.operations().refresh())
        if markers.owned_by(props, table.txn_id) and markers.marker_try(props) == try_number:
            run.warn_if(catalog.drop(staging))
            touched.append(f"{staging} (dropped with its directory)")
        else:
            run.log.warning(f"{staging} does not carry this transaction's markers; left alone")
    return touched


def drop_branches(run: IcebergRun, up_to: int) -> list[str]:
    """Branches of tries ``<= up_to``, and the fence if it names one of them: one metadata swap."""
    catalog, txn, target = run.catalog, run.table.txn_id, run.table.target
    existing = catalog.load(target)
    if existing is None:
        return []
    dropped: list[str] = []
    catalog.commit(existing, lambda base, builder: without_branches(catalog, base, builder, txn, up_to, dropped))
    return [f"{target} (branch {name} dropped)" for name in dropped]


def without_branches(
    catalog: IcebergCatalog, base: Any, builder: Any, txn_id: str, up_to: int, dropped: list[str]
) -> Any | None:
    """``builder`` without the branches of tries ``<= up_to`` of ``txn_id`` and the fences naming
    them (their names go into ``dropped``); None when there is nothing to drop."""
    dropped[:] = [n for n in md.refs(base) if (t := branch_try(n, txn_id)) is not None and t <= up_to]
    stale = fence.keys_of(md.properties(base), txn_id, up_to=up_to)
    if not dropped and not stale:
        return None
    for name in dropped:
        builder = builder.removeRef(name)
    return builder.removeProperties(catalog.java_set(stale)) if stale else builder
