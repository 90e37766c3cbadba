"""Field ids for a replace that changes an Iceberg table's shape, computed on the JSON forms of
Iceberg's schemas and partition specs (pure: no Spark, no JVM).

A data file stores each column under its field id, so the staging table must hold the ids the
target will have after the publish: a column keeps the id of the target's column of the same name
and type (so sort orders and partition fields on kept columns still bind), any other gets a fresh
id above the target's ``last-column-id`` (never one a dropped column had). Unlike Iceberg's own
``CREATE OR REPLACE``, a column whose type changes gets a new id: Iceberg re-binds the table's
earlier partition specs to the current schema, and one on that id would then read its partition
values as the new type (its overwrite fails on them). A partition field reuses the id and name of
the target's field with the same source and transform, in any of its specs; others get fresh ids."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

Json = dict[str, Any]


def ids_by_path(schema: Json) -> dict[str, tuple[int, str]]:
    """Every field of a schema by its lower-cased path (``a.b``, ``l.element``, ``m.key``): its id
    and its type (a primitive's name, or ``struct``, ``list``, ``map``)."""
    return {path: (field_id, kind) for path, field_id, kind, _ in _walk(schema, "")}


def reassign(schema: Json, target: Json, last_column_id: int) -> tuple[Json, int]:
    """``schema`` with the target's ids where name path and type match, fresh ids above
    ``last_column_id`` elsewhere; the new last column id."""
    known, result = ids_by_path(target), copy.deepcopy(schema)
    fresh = last_column_id
    for path, _, kind, holder in list(_walk(result, "")):
        key = holder[1]
        if path in known and known[path][1] == kind:
            holder[0][key] = known[path][0]
        else:
            fresh += 1
            holder[0][key] = fresh
    result["schema-id"] = 0
    return result, max(fresh, last_column_id)


def with_docs(schema: Json, docs: Mapping[str, str]) -> Json:
    """``schema`` whose top-level columns carry ``docs`` (by lower-cased name)."""
    result = copy.deepcopy(schema)
    for field in result["fields"]:
        doc = docs.get(field["name"].lower())
        if doc is not None:
            field["doc"] = doc
    return result


def top_level_docs(schema: Json) -> dict[str, str]:
    return {f["name"].lower(): f["doc"] for f in schema["fields"] if f.get("doc") is not None}


def renumber_spec(spec: Json, target_specs: list[Json], last_partition_id: int) -> tuple[Json, int]:
    """``spec`` (its source ids already the target's) with partition field ids: reused where a
    target spec has a field of the same source and transform, fresh above ``last_partition_id``
    elsewhere; the new last partition id."""
    existing = {(f["source-id"], f["transform"]): f for s in target_specs for f in s["fields"]}
    result, fresh = copy.deepcopy(spec), last_partition_id
    for field in result["fields"]:
        same = existing.get((field["source-id"], field["transform"]))
        if same is not None:
            field["field-id"], field["name"] = same["field-id"], same["name"]
        else:
            fresh += 1
            field["field-id"] = fresh
    result["spec-id"] = 0
    return result, fresh


def _kind(node: Any) -> str:
    return str(node["type"]) if isinstance(node, dict) else str(node).replace(" ", "")


def _walk(node: Any, prefix: str) -> Iterator[tuple[str, int, str, tuple[Json, str]]]:
    """(path, id, type, (the dict holding the id, its key)) for every field, parents first."""
    kind = node.get("type") if isinstance(node, dict) else None
    if kind == "struct":
        for field in node["fields"]:
            path = prefix + field["name"].lower()
            yield path, field["id"], _kind(field["type"]), (field, "id")
            yield from _walk(field["type"], path + ".")
    elif kind == "list":
        yield prefix + "element", node["element-id"], _kind(node["element"]), (node, "element-id")
        yield from _walk(node["element"], prefix + "element.")
    elif kind == "map":
        for part in ("key", "value"):
            yield prefix + part, node[f"{part}-id"], _kind(node[part]), (node, f"{part}-id")
            yield from _walk(node[part], f"{prefix}{part}.")
