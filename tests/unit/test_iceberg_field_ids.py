"""Field ids for a replace that changes an Iceberg table's shape (``catalogs/iceberg/field_ids.py``),
on the JSON Iceberg's ``SchemaParser`` and ``PartitionSpecParser`` write. The replace itself runs
against real catalogs in ``tests/integration/test_iceberg.py`` and ``test_iceberg_rest.py``."""

from __future__ import annotations

from typing import Any

from airflow_provider_ctas.catalogs.iceberg import field_ids


def _field(field_id: int, name: str, kind: Any, doc: str | None = None) -> dict[str, Any]:
    field = {"id": field_id, "name": name, "required": False, "type": kind}
    return field if doc is None else {**field, "doc": doc}


def _schema(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "schema-id": 3, "fields": list(fields)}


# The target: id long (1), ds string (2), st struct<a long (4)> (3), tags list<string> (5, element 6).
TARGET = _schema(
    _field(1, "id", "long", doc="the key"),
    _field(2, "ds", "string"),
    _field(3, "st", {"type": "struct", "fields": [_field(4, "a", "long")]}),
    _field(5, "tags", {"type": "list", "element-id": 6, "element": "string", "element-required": False}),
)


def test_same_name_and_type_keep_their_ids_and_anything_else_gets_one_above_the_last():
    # As the staging table was created: ids 1.. in its own order.
    staging = _schema(
        _field(1, "ID", "long"),
        _field(2, "ts", "timestamptz"),
        _field(3, "ds", "date"),
        _field(4, "st", {"type": "struct", "fields": [_field(6, "a", "long"), _field(7, "b", "string")]}),
        _field(5, "tags", {"type": "list", "element-id": 8, "element": "string", "element-required": False}),
    )
    reassigned, last = field_ids.reassign(staging, TARGET, last_column_id=9)
    assert field_ids.ids_by_path(reassigned) == {
        "id": (1, "long"),  # the same column, matched case-insensitively
        "ts": (10, "timestamptz"),  # new
        "ds": (11, "date"),  # its type changed: a new id, never 2
        "st": (3, "struct"),
        "st.a": (4, "long"),
        "st.b": (12, "string"),
        "tags": (5, "list"),
        "tags.element": (6, "string"),
    }
    assert last == 12
    assert reassigned["schema-id"] == 0
    assert staging["fields"][0]["id"] == 1 and staging["fields"][1]["id"] == 2, "the input is left as it was"


def test_no_new_column_keeps_the_last_column_id():
    reassigned, last = field_ids.reassign(_schema(_field(7, "id", "long")), TARGET, last_column_id=9)
    assert field_ids.ids_by_path(reassigned) == {"id": (1, "long")}
    assert last == 9, "ids of dropped columns are never handed out again"


def test_map_keys_and_values_match_by_path():
    target = _schema(_field(1, "m", {"type": "map", "key-id": 2, "key": "string", "value-id": 3, "value": "long",
                                     "value-required": False}))  # fmt: skip
    staging = _schema(_field(1, "m", {"type": "map", "key-id": 2, "key": "string", "value-id": 3, "value": "int",
                                      "value-required": False}))  # fmt: skip
    reassigned, last = field_ids.reassign(staging, target, last_column_id=3)
    assert field_ids.ids_by_path(reassigned) == {"m": (1, "map"), "m.key": (2, "string"), "m.value": (4, "int")}
    assert last == 4


def test_docs_go_to_top_level_columns_by_name():
    documented = field_ids.with_docs(_schema(_field(1, "ID", "long"), _field(2, "x", "long")), {"id": "the key"})
    assert [f.get("doc") for f in documented["fields"]] == ["the key", None]
    assert field_ids.top_level_docs(TARGET) == {"id": "the key"}


def test_a_partition_field_reuses_the_id_of_the_same_source_and_transform_in_any_spec():
    specs = [
        {"spec-id": 0, "fields": [{"name": "ds", "transform": "identity", "source-id": 2, "field-id": 1000}]},
        {"spec-id": 1, "fields": [{"name": "id_bucket", "transform": "bucket[4]", "source-id": 1, "field-id": 1001}]},
    ]
    new = {"spec-id": 0, "fields": [
        {"name": "id_bucket_4", "transform": "bucket[4]", "source-id": 1, "field-id": 1000},
        {"name": "ts_day", "transform": "day", "source-id": 10, "field-id": 1001},
        {"name": "id_bucket_8", "transform": "bucket[8]", "source-id": 1, "field-id": 1002},
    ]}  # fmt: skip
    renumbered, last = field_ids.renumber_spec(new, specs, last_partition_id=1001)
    assert [(f["name"], f["field-id"]) for f in renumbered["fields"]] == [
        ("id_bucket", 1001),  # the existing field, its name too
        ("ts_day", 1002),
        ("id_bucket_8", 1003),
    ]
    assert last == 1003
