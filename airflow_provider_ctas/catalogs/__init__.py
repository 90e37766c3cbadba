"""Catalog strategies and the factory that picks one for a target.

Like FLIP-305's ``Catalog#createTwoPhaseCatalogTable``, the factory either returns a two-phase table
that can make the target atomic or says why it cannot; it never falls back to a non-atomic path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from airflow_provider_ctas.catalogs.session_catalog.table import (
    DEFAULT_RETENTION_SECONDS,
    FILE_FORMATS,
    Mode,
    SessionCatalogTable,
    validate_mode,
    validate_retention,
)
from airflow_provider_ctas.core.errors import (
    AtomicityNotSupportedError,
    CorruptStateError,
    InvalidInputError,
)
from airflow_provider_ctas.core.identifiers import (
    validate_columns,
    validate_table_properties,
    validate_target,
)
from airflow_provider_ctas.core.transaction import (
    TransactionKey,
    TwoPhaseTable,
    load_table,
    validate_conn_id,
)

__all__ = ["SessionCatalogTable", "create_two_phase_table", "load_two_phase_table"]


def load_two_phase_table(data: object) -> TwoPhaseTable:
    """Deserialize a two-phase table of any kind registered by this package (see ``load_table``)."""
    return load_table(data)


# Formats users ask for that need a catalog with its own transactions (a StagingTableCatalog).
_TRANSACTIONAL_FORMATS = {"delta", "iceberg", "hudi", "paimon"}


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
    superseded_retention: object = DEFAULT_RETENTION_SECONDS,
) -> TwoPhaseTable:
    """Validate a request and return the two-phase table that can publish it atomically."""
    ref = validate_target(target)
    validated_mode = validate_mode(mode)
    columns = validate_columns(partition_by, "partition_by")
    properties = validate_table_properties(table_properties)
    try:
        conn = validate_conn_id(conn_id)
    except CorruptStateError as exc:
        raise InvalidInputError(str(exc)) from exc
    if not isinstance(table_format, str):
        raise InvalidInputError(f"table_format must be a string, got {type(table_format).__name__}")
    fmt = table_format.lower()
    if validated_mode is Mode.OVERWRITE_PARTITIONS and not columns:
        raise InvalidInputError("mode 'overwrite_partitions' needs partition_by (the partitions it overwrites)")
    if fmt in FILE_FORMATS:
        return SessionCatalogTable(
            key=key,
            conn_id=conn,
            target=ref,
            mode=validated_mode,
            table_format=fmt,
            partition_by=columns,
            table_properties=properties,
            allow_swap=bool(allow_swap),
            superseded_retention_seconds=validate_retention(superseded_retention),
        )
    if fmt in _TRANSACTIONAL_FORMATS:
        raise AtomicityNotSupportedError(
            f"table_format {table_format!r} needs its own catalog (Spark's StagingTableCatalog from the "
            f"{fmt} runtime jar), which this provider does not drive yet; its CREATE TABLE AS SELECT is "
            "already atomic inside one Spark job, so use SparkSqlOperator for it"
        )
    raise AtomicityNotSupportedError(
        f"table_format {table_format!r} cannot be made atomic: no catalog strategy supports it; "
        f"file formats of Spark's session catalog are: {', '.join(sorted(FILE_FORMATS))}"
    )
