"""Who created what: the predicates recovery (in a task's driver) and garbage collection share.

Nothing is dropped or deleted unless one of these says this provider created it; keeping them in
one place keeps the two paths from drifting apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_ctas.core import markers


def is_staging_of(properties: Mapping[str, str], txn_id: str, try_number: int) -> bool:
    """The table is the staging table that try ``try_number`` of ``txn_id`` created."""
    return markers.owned_by(properties, txn_id) and markers.marker_try(properties) == try_number


def holds_staging(properties: Mapping[str, str], txn_id: str, name_try: int, up_to: int) -> bool:
    """The staging table named for try ``name_try`` is held by a try <= ``up_to`` of ``txn_id``:
    the try that created it, or a later one that adopted it (``core.durable``)."""
    holder = markers.marker_try(properties)
    return markers.owned_by(properties, txn_id) and holder is not None and name_try <= holder <= up_to


def is_staging_named(properties: Mapping[str, str], name: markers.ReservedName, adopted_by: int | None = None) -> bool:
    """A table under a reserved staging name carries the markers that name promises: of the try in
    the name, or of the later try ``adopted_by`` that its prepared record says took it over
    (``core.durable``); any other try in its markers is not what the name promises."""
    txn_id = properties.get(markers.TXN_ID, "")
    holder = markers.marker_try(properties)
    return markers.txn_tag(txn_id) == name.tag and holder in {name.try_number, adopted_by}


def moved_aside_by(properties: Mapping[str, str]) -> tuple[str, str] | None:
    """(transaction id, target) of the swap that moved this backup table aside, or None."""
    txn_id = properties.get(markers.SUPERSEDED_BY, "").split(":", 1)[0]
    target = properties.get(markers.SUPERSEDED_TARGET, "")
    return (txn_id, target) if txn_id and target else None


def created_by_provider(properties: Mapping[str, str]) -> bool:
    """The table (a previous version) was itself published by this provider."""
    return markers.TXN_ID in properties


def replaceable(table_type: str, properties: Mapping[str, str]) -> bool:
    """A target a replace may point elsewhere: a managed table (the metastore owns its data) or an
    external one this provider published (on an object store every table it creates is external)."""
    return table_type == "MANAGED" or (table_type == "EXTERNAL" and created_by_provider(properties))


def feeds(path: str, live: Sequence[str]) -> bool:
    """A table reads from ``path``: its location or a partition's is ``path`` or inside it."""
    path = path.rstrip("/")
    return any(p == path or p.startswith(path + "/") for p in live)


def describe_owner(properties: Mapping[str, str]) -> str:
    """Who made the table, to follow 'created by' or 'exists, '."""
    if markers.DAG_ID not in properties:
        return "someone other than airflow-provider-ctas (it carries none of its markers)"
    return (
        f"airflow-provider-ctas in dag {properties.get(markers.DAG_ID)!r}, task {properties.get(markers.TASK_ID)!r}, "
        f"run {properties.get(markers.RUN_ID)!r} (try {properties.get(markers.TRY_NUMBER)})"
    )
