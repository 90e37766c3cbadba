"""``partition_by`` entries: a column name, or (for Iceberg tables) one of Iceberg's partition
transforms over a column, ``years(ts)``, ``months(ts)``, ``days(ts)``, ``hours(ts)``,
``bucket(16, id)``, ``truncate(4, name)``.

Entries are parsed against a fixed grammar and kept in one canonical spelling (``days(ts)``,
``bucket(16, id)``), which is also how a table's existing partitioning is described, so that
"the table is partitioned the way ``partition_by`` says" is a comparison of strings. They reach
SQL only through ``sql``, which quotes the column: an entry can never change a statement's shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import quote, validate_name

TIME_TRANSFORMS = ("years", "months", "days", "hours")
WIDTH_TRANSFORMS = ("bucket", "truncate")
_TIME = re.compile(r"(?i)\s*(years|months|days|hours)\s*\(\s*([^,()\s]+)\s*\)\s*")
_WIDTH = re.compile(r"(?i)\s*(bucket|truncate)\s*\(\s*(\d{1,9})\s*,\s*([^,()\s]+)\s*\)\s*")
EXAMPLES = "a column name, or days(ts), months(ts), years(ts), hours(ts), bucket(16, id), truncate(4, name)"


@dataclass(frozen=True)
class PartitionField:
    column: str
    transform: str = "identity"
    width: int | None = None

    @property
    def canonical(self) -> str:
        if self.transform == "identity":
            return self.column
        if self.width is None:
            return f"{self.transform}({self.column})"
        return f"{self.transform}({self.width}, {self.column})"

    def sql(self) -> str:
        """As ``PARTITIONED BY`` takes it, the column quoted."""
        if self.transform == "identity":
            return quote(self.column)
        if self.width is None:
            return f"{self.transform}({quote(self.column)})"
        return f"{self.transform}({self.width}, {quote(self.column)})"


def parse_field(entry: object, what: str = "partition_by") -> PartitionField:
    if not isinstance(entry, str):
        raise InvalidInputError(f"an entry of {what} must be a string, got {type(entry).__name__}")
    if match := _TIME.fullmatch(entry):
        return PartitionField(validate_name(match.group(2), f"column in {what}"), match.group(1).lower())
    if match := _WIDTH.fullmatch(entry):
        width = int(match.group(2))
        if width < 1:
            raise InvalidInputError(f"{what} entry {entry!r}: the width must be at least 1")
        return PartitionField(validate_name(match.group(3), f"column in {what}"), match.group(1).lower(), width)
    if "(" in entry:
        raise InvalidInputError(f"{what} entry {entry!r} is not a partition transform this provider knows: {EXAMPLES}")
    return PartitionField(validate_name(entry, f"column in {what}"))


def validate_partition_by(entries: object, what: str = "partition_by") -> tuple[str, ...]:
    """The entries in canonical spelling, in order; a column partitioned twice the same way is an
    error. Whether transforms are allowed is the table format's call (``columns_only``)."""
    if entries is None:
        return ()
    if isinstance(entries, str) or not isinstance(entries, Iterable):
        raise InvalidInputError(f"{what} must be a list ({EXAMPLES}), got {type(entries).__name__}")
    seen: list[str] = []
    for entry in entries:
        canonical = parse_field(entry, what).canonical
        if canonical in seen:
            raise InvalidInputError(f"{what} names {canonical!r} twice")
        seen.append(canonical)
    return tuple(seen)


def columns_only(partition_by: tuple[str, ...], format_name: str) -> tuple[str, ...]:
    """Raises unless every entry is a plain column: partition transforms are Iceberg's."""
    transformed = [entry for entry in partition_by if parse_field(entry).transform != "identity"]
    if transformed:
        raise InvalidInputError(
            f"partition_by {transformed} uses partition transforms, which only Iceberg tables have; "
            f"{format_name} tables are partitioned by columns"
        )
    return partition_by


def source_columns(partition_by: Iterable[str]) -> list[str]:
    return [parse_field(entry).column for entry in partition_by]
