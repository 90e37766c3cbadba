"""A replace that changes an existing Iceberg table's columns or partitioning, as ``CREATE OR
REPLACE TABLE ... AS SELECT`` does, staged so that readers of the current version never see the new
shape before the publish.

begin raises the fence and makes this try's branch, as for any replace (the branch holds no data:
it is the token a newer try's begin removes), then creates a staging table, unpartitioned, and
gives it, before any data is written, the schema and partitioning the target will have: the field
ids of ``field_ids.py`` and a spec on them. Its data files go under the target's data location, so
that the published snapshot owns them and dropping the staging table never touches them.

The publish (``publish/reshape.py``) builds, on the metadata it replaces, the target's new schema,
default spec and one overwrite snapshot of the staging table's files, and swaps it in one
compare-and-swap with the same preconditions as a branch publish, plus: the target's last column and
partition ids unchanged since begin (the fresh ids must still be fresh)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.iceberg import field_ids
from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.plan import IcebergPlan, Publish
from airflow_provider_ctas.catalogs.iceberg.run import IcebergRun
from airflow_provider_ctas.catalogs.iceberg.shape import iceberg_columns, same_columns
from airflow_provider_ctas.catalogs.provenance import new_table_properties
from airflow_provider_ctas.core.comments import Comments
from airflow_provider_ctas.core.errors import FencedError, UnsupportedTargetError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.partitioning import parse_field
from airflow_provider_ctas.spark.ddl import create_table_sql

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable

DATA_PATH = "write.data.path"
_BUILDER_METHODS = {"identity": "identity", "years": "year", "months": "month", "days": "day", "hours": "hour"}


@dataclass(frozen=True)
class Reshape:
    """The target's id counters when begin computed the new ids: a publish refuses once they moved."""

    last_column_id: int
    last_partition_id: int


def changes_shape(table: IcebergTable, current: Any, schema: StructType) -> bool:
    """Whether this replace changes the target's columns or (``partition_by`` given) partitioning."""
    if table.mode is not Mode.REPLACE:
        return False
    spelled = [entry for entry, _ in md.partitioning(current)]
    return not same_columns(iceberg_columns(current), schema) or bool(
        table.partition_by and list(table.partition_by) != spelled
    )


def data_location(current: Any) -> str:
    """Where the target writes its data files (its ``write.data.path``, or ``<location>/data``)."""
    return md.properties(current).get(DATA_PATH) or f"{str(current.location()).rstrip('/')}/data"


def stage(run: IcebergRun, existing: Any, schema: StructType) -> tuple[IcebergPlan, str]:
    """The fence and branch first, so that a newer try's begin, which drops this try's staging
    table, also removes the token this try's publish asserts."""
    catalog, table = run.catalog, run.table

    def format_2(base: Any) -> None:
        if base.formatVersion() < 2:
            raise UnsupportedTargetError(
                f"{table.target} is an Iceberg format-version 1 table: a replace that changes its columns or "
                "partitioning needs format-version 2 or later (ALTER TABLE ... SET TBLPROPERTIES "
                "('format-version'='2'))"
            )

    base, base_snapshot = run.open_branch(existing, format_2)
    staging = table.staging_table()
    props = {**new_table_properties(table), DATA_PATH: data_location(base)}
    run.spark.sql(create_table_sql(staging.quoted, schema, "iceberg", (), props))
    loaded = catalog.load(staging)
    if loaded is None:
        raise FencedError(f"{staging} is gone right after its creation: a newer try has taken over")
    new_schema, last_column_id = _target_schema(run, base, loaded.operations().current(), schema)
    spec = _target_spec(run, base, new_schema)
    catalog.commit(
        loaded,
        lambda sbase, builder: builder.setCurrentSchema(
            new_schema, max(last_column_id, sbase.lastColumnId())
        ).setDefaultPartitionSpec(spec),
    )
    run.spark.sql(f"REFRESH TABLE {staging.quoted}")
    run.details["publish_mechanism"] = Publish.RESHAPE.value
    run.details["base_snapshot_id"] = base_snapshot
    reshape = Reshape(int(base.lastColumnId()), int(base.lastAssignedPartitionId()))
    plan = IcebergPlan(Publish.RESHAPE, schema, base_snapshot, reshape=reshape)
    partitioning = ", ".join(e for e, _ in md.partitioning_of(spec, new_schema)) or "unpartitioned"
    return plan, (
        f"{table.target} (branch {table.branch} from snapshot {base_snapshot}; fence raised to try "
        f"{table.try_number}); "
        f"{staging} (created, empty, in the new shape: {len(schema.fields)} columns, {partitioning})"
    )


def _target_schema(run: IcebergRun, base: Any, staging: Any, schema: StructType) -> tuple[Any, int]:
    """The staging table's schema with the target's ids and column docs, checked against every sort
    order the target has had: Iceberg binds them all to the current schema, so one on a dropped
    column would make the table unwritable (Iceberg's own ``CREATE OR REPLACE`` fails on a dropped one too)."""
    parser = run.catalog.jvm.org.apache.iceberg.SchemaParser
    current = json.loads(str(parser.toJson(base.schema())))
    reassigned, last_column_id = field_ids.reassign(
        json.loads(str(parser.toJson(staging.schema()))), current, int(base.lastColumnId())
    )
    existing = Comments(table=md.properties(base).get("comment"), columns=field_ids.top_level_docs(current))
    docs = run.table.comments.over(existing, [f.name for f in schema.fields]).columns
    new_schema = parser.fromJson(json.dumps(field_ids.with_docs(reassigned, docs)))
    for order in base.sortOrders():
        dropped = [int(f.sourceId()) for f in order.fields() if new_schema.findField(f.sourceId()) is None]
        if dropped:
            names = [_column_name(base, field_id) for field_id in dropped]
            raise UnsupportedTargetError(
                f"{run.table.target} has (or had) a sort order on {names}, which the query drops or changes the "
                "type of: Iceberg binds every sort order a table has had to its current schema, so the replaced "
                "table could not be written (Iceberg's own CREATE OR REPLACE fails on a dropped one too); keep those "
                "columns as they are, or drop the table and create it anew"
            )
    return new_schema, last_column_id


def _column_name(base: Any, field_id: int) -> str:
    for schema in base.schemas():
        name = schema.findColumnName(field_id)
        if name is not None:
            return str(name)
    return f"field {field_id}"


def _target_spec(run: IcebergRun, base: Any, new_schema: Any) -> Any:
    """The spec for ``partition_by`` (or, not given, the target's partitioning) on the new schema."""
    table, jvm = run.table, run.catalog.jvm
    entries = list(table.partition_by) or [entry for entry, _ in md.partitioning(base)]
    builder = jvm.org.apache.iceberg.PartitionSpec.builderFor(new_schema).caseSensitive(False)
    for entry in entries:
        field = parse_field(entry)
        if new_schema.caseInsensitiveFindField(field.column) is None:
            raise UnsupportedTargetError(
                f"{table.target} is partitioned by {entry}, and the query has no column {field.column!r}: pass "
                "partition_by for the new partitioning"
            )
        if field.transform in _BUILDER_METHODS:
            builder = getattr(builder, _BUILDER_METHODS[field.transform])(field.column)
        else:  # bucket, truncate
            builder = getattr(builder, field.transform)(field.column, field.width)
    parser = jvm.org.apache.iceberg.PartitionSpecParser
    specs = [json.loads(str(parser.toJson(s))) for s in base.specs()]
    spec, _ = field_ids.renumber_spec(
        json.loads(str(parser.toJson(builder.build()))), specs, int(base.lastAssignedPartitionId())
    )
    return parser.fromJson(new_schema, json.dumps(spec))
