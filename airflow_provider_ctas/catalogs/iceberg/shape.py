"""What an existing Iceberg target accepts on a branch: the same columns and partitioning (a branch
holds snapshots of the table's own schema; a replace that changes them is staged in a table of its
own, ``reshape.py``), the tries' branches a metadata swap keeps, and the catalogs a publish group
can use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.table import branch_try
from airflow_provider_ctas.core.errors import UnsupportedTargetError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog


def require_group_target(catalog: IcebergCatalog, target: Any, existing: Any | None) -> None:
    """A publish group publishes its members in one multi-table commit, which a REST catalog offers
    and which updates existing tables only (a new table would need a rename of its own)."""
    if catalog.type != "rest":
        raise UnsupportedTargetError(
            f"publish groups need an Iceberg REST catalog (its multi-table commit); catalog {catalog.name!r} is "
            f"type={catalog.type}"
        )
    if existing is None:
        raise UnsupportedTargetError(
            f"{target} does not exist: a publish group replaces existing tables in one commit; create it once "
            "without publish_group"
        )


def without_other_tries(base: Any, builder: Any, txn_id: str, try_number: int) -> Any:
    """``builder`` without the branches of this transaction's other tries."""
    for name in md.refs(base):
        other = branch_try(name, txn_id)
        if other is not None and other != try_number:
            builder = builder.removeRef(name)
    return builder


def require_same_shape(target: str, metadata: Any, schema: StructType, partition_by: tuple[str, ...]) -> dict[str, str]:
    """A branch holds snapshots of the target's own schema and partitioning; Iceberg's schema is
    table-wide, so changing it there would show the new shape to readers of the old version. Returns
    the table's partition fields (as ``partition_by`` spells them) with their names in the partition
    struct."""
    columns = iceberg_columns(metadata)
    if not same_columns(columns, schema):
        new = [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]
        raise UnsupportedTargetError(
            f"the query's columns {new} differ from {target}'s {columns}: overwrite_partitions, a publish group's "
            "member and an adopted durable try keep the table's schema; mode='replace' (on its own) changes it"
        )
    fields = dict(md.partitioning(metadata))
    if partition_by and list(partition_by) != list(fields):
        raise UnsupportedTargetError(
            f"partition_by {list(partition_by)} differs from {target}'s partitioning {list(fields)}; "
            "overwrite_partitions and a publish group's member keep the table's partitioning; mode='replace' (on "
            "its own) changes it"
        )
    return fields


# Iceberg accepts these into a wider column on write (type promotion).
_WIDENS = frozenset({("int", "long"), ("float", "double")})


def iceberg_columns(metadata: Any) -> list[tuple[str, str]]:
    """The table's columns as (lower-cased name, Iceberg type)."""
    return [(str(f.name()).lower(), str(f.type())) for f in metadata.schema().columns()]


def same_columns(current: list[tuple[str, str]], schema: StructType) -> bool:
    """Whether a query of ``schema`` can be written as a snapshot of a table whose columns are
    ``current`` (name, Iceberg type): the same names in the same order, each type equal or one
    Iceberg promotes on write. Nested types are left to Iceberg's own write check."""
    if [name for name, _ in current] != [f.name.lower() for f in schema.fields]:
        return False
    for (_, old), field in zip(current, schema.fields, strict=True):
        new, old = _iceberg_type(field.dataType), old.replace(" ", "")
        if new is not None and new != old and (new, old) not in _WIDENS:
            return False
    return True


def _iceberg_type(data_type: Any) -> str | None:
    """Iceberg's name for a Spark atomic type (``decimal(p,s)`` without Iceberg's space), or None."""
    names = {
        "bigint": "long",
        "int": "int",
        "smallint": "int",
        "tinyint": "int",
        "string": "string",
        "double": "double",
        "float": "float",
        "boolean": "boolean",
        "date": "date",
        "timestamp": "timestamptz",
        "timestamp_ntz": "timestamp",
        "binary": "binary",
    }
    simple = str(data_type.simpleString())
    if simple.startswith("decimal"):
        return simple.replace(" ", "")
    return names.get(simple)
