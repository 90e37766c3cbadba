"""A statement's rows in as few round trips as the session allows.

Over Spark Connect the server runs a command (``DESCRIBE``, ``SHOW``, ``ALTER``) when it is sent and
answers with its rows as one Arrow batch, which pyspark keeps in the DataFrame's plan; ``collect()``
then sends that batch back to the server to run it again and fetch it. A flip's commit makes five
such statements (about 20 ms each here, issue 53), so the rows are read from the answer itself
where it holds them inline, and collected otherwise (a query, a classic session, another pyspark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

# Arrow types whose Python values are those ``collect()`` gives; any other column is collected.
_PLAIN_TYPES = ("string", "large_string", "bool", "int8", "int16", "int32", "int64")


def statement_rows(spark: SparkSession, statement: str) -> list[Row]:
    frame = spark.sql(statement)
    rows = _inline_rows(frame)
    return frame.collect() if rows is None else rows


def _inline_rows(frame: DataFrame) -> list[Row] | None:
    if not type(frame).__module__.startswith("pyspark.sql.connect"):
        return None
    relation: Any = getattr(getattr(frame, "_plan", None), "_plan", None)
    if relation is None or not hasattr(relation, "WhichOneof") or relation.WhichOneof("rel_type") != "local_relation":
        return None
    local = relation.local_relation
    if not local.HasField("data"):
        return None
    import pyarrow as pa
    from pyspark.sql import Row

    table = pa.ipc.open_stream(local.data).read_all()
    if any(str(field.type) not in _PLAIN_TYPES for field in table.schema):
        return None
    return [Row(**values) for values in table.to_pylist()]
