"""Render a query's schema as column DDL with every name quoted.

PySpark 4.3 has no ``StructType.toDDL``; ``simpleString`` does not quote nested field names, so
complex types are rendered here and only atomic types use Spark's own spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_ctas.core.comments import Comments
from airflow_provider_ctas.core.identifiers import quote, sql_string_literal
from airflow_provider_ctas.core.partitioning import parse_field

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


def type_ddl(data_type: DataType) -> str:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        inner = ", ".join(f"{quote(f.name)}: {type_ddl(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{inner}>"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{type_ddl(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{type_ddl(data_type.keyType)}, {type_ddl(data_type.valueType)}>"
    return str(data_type.simpleString())


def columns_ddl(schema: StructType, comments: Comments | None = None) -> str:
    """Column list for CREATE TABLE; nullability is dropped, as Spark's own CTAS does for file tables."""
    texts = comments.columns if comments else {}
    return ", ".join(
        f"{quote(f.name)} {type_ddl(f.dataType)}"
        + (f" COMMENT {sql_string_literal(texts[f.name.lower()])}" if f.name.lower() in texts else "")
        for f in schema.fields
    )


def create_table_sql(
    name: str,
    schema: StructType,
    using: str,
    partition_by: Sequence[str],
    properties: Mapping[str, str],
    location: str | None = None,
    comments: Comments | None = None,
) -> str:
    """An empty table with its properties and comments in the same statement: the markers are
    there from the table's first moment, and no second metastore call sets them."""
    clauses = [f"CREATE TABLE {name} ({columns_ddl(schema, comments)})", f"USING {using}"]
    if partition_by:
        # A transform (validated, Iceberg only) is rendered by its parser; a column is quoted as it is.
        fields = (parse_field(e).sql() if "(" in e else quote(e) for e in partition_by)
        clauses.append(f"PARTITIONED BY ({', '.join(fields)})")
    if location is not None:
        clauses.append(f"LOCATION {sql_string_literal(location)}")
    if comments and comments.table is not None:
        clauses.append(f"COMMENT {sql_string_literal(comments.table)}")
    assignments = ", ".join(f"{sql_string_literal(k)}={sql_string_literal(v)}" for k, v in properties.items())
    clauses.append(f"TBLPROPERTIES ({assignments})")
    return "\n".join(clauses)
