"""Catalog strategies, and the registry the operator, the driver, GC and lineage ask.

Like FLIP-305's ``Catalog#createTwoPhaseCatalogTable``, the registry either returns a two-phase table
that can make the target atomic or says why it cannot; it never falls back to a non-atomic path.
Adding a table format is one package (a :class:`Strategy`) and one line in ``STRATEGIES``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from airflow_provider_ctas.catalogs.delta.strategy import STRATEGY as DELTA
from airflow_provider_ctas.catalogs.iceberg.strategy import GROUP_STRATEGY as ICEBERG_GROUP
from airflow_provider_ctas.catalogs.iceberg.strategy import STRATEGY as ICEBERG
from airflow_provider_ctas.catalogs.session_catalog.strategy import STRATEGY as SESSION_CATALOG
from airflow_provider_ctas.catalogs.strategy import RequestSpec, Strategy
from airflow_provider_ctas.core.errors import AtomicityNotSupportedError, CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.transaction import TransactionKey, TwoPhaseTable, load_table, validate_conn_id

__all__ = ["STRATEGIES", "Strategy", "create_two_phase_table", "gc_strategy", "load_two_phase_table", "strategy_for"]

STRATEGIES: tuple[Strategy, ...] = (SESSION_CATALOG, ICEBERG, DELTA)
_GROUPS: tuple[Strategy, ...] = (ICEBERG_GROUP,)
"""Kinds that publish several tables at once; no ``table_format`` selects them."""

# Formats users ask for that need a catalog with its own transactions (a StagingTableCatalog); no
# strategy serves them yet.
_TRANSACTIONAL_FORMATS = frozenset({"hudi", "paimon"})


def strategy_for(table_format: object) -> Strategy:
    """The strategy that serves ``table_format``; says why none does otherwise."""
    if not isinstance(table_format, str):
        raise InvalidInputError(f"table_format must be a string, got {type(table_format).__name__}")
    fmt = table_format.lower()
    for strategy in STRATEGIES:
        if fmt in strategy.formats:
            return strategy
    if fmt in _TRANSACTIONAL_FORMATS:
        raise AtomicityNotSupportedError(
            f"table_format {table_format!r} needs its own catalog (Spark's StagingTableCatalog from the "
            f"{fmt} runtime jar), which this provider does not drive yet; its CREATE TABLE AS SELECT is "
            "already atomic inside one Spark job, so use SparkSqlOperator for it"
        )
    served = sorted(f for strategy in STRATEGIES for f in strategy.formats)
    raise AtomicityNotSupportedError(
        f"table_format {table_format!r} cannot be made atomic: no catalog strategy supports it; "
        f"supported formats are: {', '.join(served)}"
    )


def strategy_of_kind(kind: str) -> Strategy:
    for strategy in (*STRATEGIES, *_GROUPS):
        if strategy.kind == kind:
            return strategy
    raise CorruptStateError(f"no strategy for kind {kind!r}")


def gc_strategy(catalog: str | None) -> Strategy:
    """The strategy whose GC pass collects in the namespaces of a named catalog (``catalog``), or in
    the session catalog's databases (None)."""
    scope = "named" if catalog else "session"
    for strategy in STRATEGIES:
        if strategy.gc_scope == scope:
            return strategy
    raise InvalidInputError(f"no strategy collects garbage in a {scope} catalog")


def load_two_phase_table(data: object) -> TwoPhaseTable:
    """Deserialize a two-phase table of any kind registered by this package (see ``load_table``)."""
    return load_table(data)


def create_two_phase_table(
    *,
    key: TransactionKey,
    conn_id: str,
    target: str,
    mode: str,
    table_format: str,
    partition_by: Iterable[str] | None = None,
    table_properties: Mapping[str, object] | None = None,
    allow_swap: bool = False,
    superseded_retention: object = None,
    comment: object = None,
    column_comments: object = None,
) -> TwoPhaseTable:
    """Validate a request and return the two-phase table that can publish it atomically."""
    try:
        conn = validate_conn_id(conn_id)
    except CorruptStateError as exc:
        raise InvalidInputError(str(exc)) from exc
    strategy = strategy_for(table_format)
    spec = RequestSpec(
        key=key,
        conn_id=conn,
        target=target,
        mode=mode,
        table_format=table_format,
        partition_by=partition_by,
        table_properties=table_properties,
        allow_swap=allow_swap,
        superseded_retention=superseded_retention,
        comment=comment,
        column_comments=column_comments,
    )
    return strategy.validate(spec)
