"""What begin decides, as data: the publish mechanism, the new version's columns, where staging lives.

Pure logic (no Spark, no Airflow): which mechanism a target allows and why not, as
``Transaction`` preconditions are in pyiceberg. begin computes a :class:`Plan`; prepare and commit
take it as input and check it again against the target right before publishing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from airflow_provider_ctas.core.errors import CorruptStateError, PublishError, QueryError, UnsupportedTargetError
from airflow_provider_ctas.core.identifiers import quote, sql_string_literal
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import Outcome

Column = tuple[str, str]
"""A column as (name, Spark SQL type), e.g. ``("id", "bigint")``."""


class Publish(StrEnum):
    RENAME = "rename"
    FLIP = "flip"
    SWAP = "swap"
    PARTITIONS = "partitions"


# Publishes that hand the target directories by location, never a table: their staging is only a
# marked directory (nothing registered, so nothing to drop), which the target takes over as it is.
EXTERNAL_STAGING = frozenset({Publish.FLIP, Publish.PARTITIONS})

# Filesystems where a directory rename is a copy of every object (and not atomic).
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs", "oss", "cosn", "obs"})


def on_object_store(location: str) -> bool:
    """Whether ``location`` (a database's, a table's) is on an object store, by its URI scheme."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in OBJECT_STORE_SCHEMES


class TargetShape(Protocol):
    """What the plan needs to know about an existing target (``catalog.TableInfo`` has it)."""

    @property
    def provider(self) -> str: ...
    @property
    def table_type(self) -> str: ...
    @property
    def partition_columns(self) -> list[str]: ...
    @property
    def bucketed(self) -> bool: ...
    @property
    def columns(self) -> list[Column]: ...


@dataclass(frozen=True)
class Plan:
    """begin's decision. ``skip`` set means there is nothing to run (the outcome says why)."""

    mechanism: Publish | None = None
    columns: tuple[Column, ...] = ()
    staging_location: str | None = None
    skip: Outcome | None = None
    object_store: bool = False
    """The target's database lives on an object store: no publish may move data there."""
    default_location_taken: bool = False
    """The target's default location holds a superseded version kept for readers (the target was
    flipped away from it, then dropped): a managed rename cannot move data there."""

    @property
    def external_staging(self) -> bool:
        """Staging is a marked directory that the target takes over as it is (for a rename or a
        swap, under an external table): the new version is published where it was written, and
        nothing is moved into the target's default location. A swap always does this (a
        superseded version may sit at the default location); a new table does where its default
        location is taken, and on an object store, where a rename of a managed table would copy
        every object."""
        if self.mechanism in EXTERNAL_STAGING or self.mechanism is Publish.SWAP:
            return True
        return (self.object_store or self.default_location_taken) and self.mechanism is not None

    @property
    def registered_staging(self) -> bool:
        """Staging is a table in the catalog. A flip's and a partition switch's is only its marked
        directory: they hand the target directories, not a table, and registering one and dropping
        it again costs a fresh driver about 0.9 s (``benchmarks/replace_floor.py``). Its marker
        fences it instead."""
        return self.mechanism not in EXTERNAL_STAGING

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism.value if self.mechanism else None,
            "columns": [list(c) for c in self.columns],
            "staging_location": self.staging_location,
            "skip": self.skip.value if self.skip else None,
            "object_store": self.object_store,
            "default_location_taken": self.default_location_taken,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        try:
            mechanism, skip = data["mechanism"], data["skip"]
            columns = tuple((str(name), str(kind)) for name, kind in data["columns"])
            location = data["staging_location"]
            return cls(
                Publish(mechanism) if mechanism is not None else None,
                columns,
                None if location is None else str(location),
                Outcome(skip) if skip is not None else None,
                bool(data["object_store"]),
                bool(data["default_location_taken"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"plan is invalid: {exc}") from exc


BOUNDED_STRING = re.compile(r"(char|varchar)\((\d+)\)")
"""A column declared CHAR(n) or VARCHAR(n): its values are strings that a write checks against n."""


def written_type(declared: str) -> str:
    """The type a query gives the values of a column declared ``declared``: Spark's queries give
    CHAR(n) and VARCHAR(n) values as strings (the write into the column checks them)."""
    return "string" if BOUNDED_STRING.fullmatch(declared) else declared


def length_checked(name: str, declared: str) -> str | None:
    """The expression that writes ``name`` into a column declared CHAR(n) or VARCHAR(n) as Spark's
    ``INSERT`` into it does (``CharVarcharCodegenUtils``): a longer value loses trailing spaces down
    to n, and fails the write (``EXCEED_LIMIT_LENGTH``) if that is not enough; a CHAR is padded to
    n. None for any other type, which the value is written as."""
    bounded = BOUNDED_STRING.fullmatch(declared)
    if bounded is None:
        return None
    kind, limit, column = bounded.group(1), int(bounded.group(2)), quote(name)
    error = sql_string_literal(f"[EXCEED_LIMIT_LENGTH] Exceeds char/varchar type length limitation: {limit} ({name})")
    fitted = (
        f"CASE WHEN {column} IS NULL OR length({column}) <= {limit} THEN {column} "
        f"WHEN length(rtrim({column})) <= {limit} THEN substr({column}, 1, {limit}) ELSE raise_error({error}) END"
    )
    return f"rpad({fitted}, {limit}, ' ')" if kind == "char" else fitted


def length_checks(declared: Iterable[Column]) -> dict[str, str]:
    """Each column of ``declared`` that :func:`length_checked` writes, with its select expression."""
    return {
        name: f"{checked} AS {quote(name)}"
        for name, data_type in declared
        if (checked := length_checked(name, data_type)) is not None
    }


def shape_differences(
    info: TargetShape, table_format: str, partition_by: Sequence[str], new: Sequence[Column]
) -> list[str]:
    """Why a location flip cannot turn ``info`` into the new version (empty when it can)."""
    problems = []
    if info.provider.lower() != table_format:
        problems.append(f"its format is {info.provider or 'unknown'}, the new version is {table_format}")
    if info.partition_columns or partition_by:
        problems.append("it is or would be partitioned, and a flip moves only the table's own location")
    if info.bucketed:
        problems.append("it is bucketed")
    old_columns = [f"{name} {data_type}" for name, data_type in info.columns]
    new_columns = [f"{name} {data_type}" for name, data_type in new]
    if [f"{name} {written_type(data_type)}" for name, data_type in info.columns] != new_columns:
        problems.append(f"its columns are ({', '.join(old_columns)}), the new version has ({', '.join(new_columns)})")
    return problems


def schema_drift(info: TargetShape, table_format: str, partition_by: Sequence[str], new: Sequence[Column]) -> list[str]:
    """How the query's result differs from an existing partitioned table (empty: it fits)."""
    problems = []
    if info.provider.lower() != table_format:
        problems.append(f"the table's format is {info.provider}, not {table_format}")
    if [c.lower() for c in info.partition_columns] != list(partition_by):
        problems.append(
            f"the table is partitioned by ({', '.join(info.partition_columns) or 'nothing'}), "
            f"not ({', '.join(partition_by)})"
        )
    old = {name.lower(): data_type for name, data_type in info.columns}
    fresh = {name.lower(): data_type for name, data_type in new}
    if missing := sorted(set(old) - set(fresh)):
        problems.append(f"the query does not produce column(s) {', '.join(missing)}")
    if extra := sorted(set(fresh) - set(old)):
        problems.append(f"the query produces column(s) {', '.join(extra)} the table does not have")
    changed = [f"{n} {old[n]} -> {fresh[n]}" for n in sorted(set(old) & set(fresh)) if written_type(old[n]) != fresh[n]]
    if changed:
        problems.append(f"column type(s) differ: {', '.join(changed)}")
    return problems


def choose_mechanism(
    *,
    target: str,
    info: TargetShape | None,
    mode: Mode,
    table_format: str,
    partition_by: Sequence[str],
    allow_swap: bool,
    new: Sequence[Column],
    object_store: bool = False,
) -> tuple[Publish, list[str]]:
    """The one-step publish the target allows, with the problems a swap accepts (to warn about)."""
    if info is None:
        return Publish.RENAME, []
    if mode is Mode.OVERWRITE_PARTITIONS:
        if info.bucketed:
            raise UnsupportedTargetError(
                f"overwrite_partitions cannot switch partitions of {target}: it is bucketed, and Spark buckets "
                "only an insert into a table, not the write into a directory a partition switch publishes; "
                "files without bucket ids would make its reads fail (INVALID_BUCKET_FILE). Nothing was written"
            )
        if drift := schema_drift(info, table_format, partition_by, new):
            raise QueryError(f"the query does not fit {target} (schema drift, nothing was written): {'; '.join(drift)}")
        return Publish.PARTITIONS, []
    problems = shape_differences(info, table_format, partition_by, new)
    if not problems:
        return Publish.FLIP, []
    if allow_swap and object_store and info.table_type == "MANAGED":
        raise UnsupportedTargetError(
            f"replace cannot swap {target} on an object store: it is a managed table, and renaming one "
            "makes the metastore copy every object of it; keep its shape (a replace then flips its "
            "location, copying nothing), or drop it once and let this provider create it"
        )
    if allow_swap:
        return Publish.SWAP, problems
    raise UnsupportedTargetError(
        f"replace cannot publish {target} in one metadata step: {'; '.join(problems)}. Spark's session "
        "catalog can only swap such a table with two renames, between which readers may find it missing "
        "or empty; set allow_swap=True to accept that, or keep the table's shape"
    )


def column_order(names: Sequence[str], partition_by: Sequence[str]) -> list[str]:
    """The table's column order, data columns then partition columns (as Spark's own CTAS does),
    after checking the query's columns can make such a table."""
    lowered = [n.lower() for n in names]
    duplicates = sorted({n for n in lowered if lowered.count(n) > 1})
    if duplicates:
        raise QueryError(f"the SELECT produces duplicate column names: {', '.join(duplicates)}")
    missing = [c for c in partition_by if c not in lowered]
    if missing:
        raise QueryError(
            f"partition_by column(s) {', '.join(missing)} are not produced by the SELECT, which "
            f"produces: {', '.join(names)}"
        )
    if len(partition_by) == len(names):
        raise QueryError("every column is a partition column; a table needs at least one data column")
    by_name = {n.lower(): n for n in names}
    partitions = set(partition_by)
    return [n for n in names if n.lower() not in partitions] + [by_name[c] for c in partition_by]


def partition_names(columns: Sequence[str], values: Iterable[tuple[str, ...]]) -> list[str]:
    """Hive's ``a=1/b=2`` names, sorted."""
    return sorted("/".join(f"{c}={v}" for c, v in zip(columns, vals, strict=True)) for vals in values)


_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape_path_name(name: str) -> str:
    """A partition value as Spark wrote it into a directory name, decoded (Spark's
    ``ExternalCatalogUtils.unescapePathName``: ``%XX`` is the character with that code)."""
    return _ESCAPED.sub(lambda match: chr(int(match.group(1), 16)), name)


def partition_directories(
    root: str, files: Iterable[str], partition_columns: Sequence[str]
) -> dict[tuple[str, ...], str]:
    """Partition values (in ``partition_columns`` order) to their directory, from the data files a
    partitioned write left below ``root`` (``root/a=1/b=2/part-0``), as a table's partitions
    would list them; every file must sit at exactly that depth."""
    prefix = _path_of(root).rstrip("/") + "/"
    found: dict[tuple[str, ...], str] = {}
    for file in files:
        relative = _path_of(file).split(prefix, 1)
        parts = relative[1].split("/")[:-1] if len(relative) == 2 and not relative[0] else []
        pairs = [part.split("=", 1) for part in parts]
        if len(pairs) != len(partition_columns) or any(
            len(pair) != 2 or pair[0].lower() != column.lower()
            for pair, column in zip(pairs, partition_columns, strict=False)
        ):
            raise PublishError(
                f"{file} is not in a partition directory ({'/'.join(f'{c}=...' for c in partition_columns)}) of {root}"
            )
        values = tuple(unescape_path_name(value) for _, value in pairs)
        found[values] = f"{root.rstrip('/')}/{'/'.join(parts)}"
    return found


def _path_of(uri: str) -> str:
    """The path part of a URI or a plain path (``file:/a/b``, ``s3a://bucket/a/b``, ``/a/b``). Not
    ``urlparse``: these are Hadoop paths as listed, unescaped, where ``?`` and ``#`` are characters."""
    scheme, sep, rest = uri.partition(":")
    if not sep or "/" in scheme:
        return uri
    if rest.startswith("//"):
        rest = rest[2:]
        slash = rest.find("/")
        return rest[slash:] if slash >= 0 else "/"
    return rest
