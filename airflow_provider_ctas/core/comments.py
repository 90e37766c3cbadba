"""Table and column comments: what a publish gives the table.

A replace must not erase the documentation people wrote on a table (``COMMENT ON TABLE``,
``ALTER TABLE ... ALTER COLUMN ... COMMENT``, a catalog UI): the published table keeps the
existing comments of the columns it still has, and the operator's ``comment=`` and
``column_comments=`` change only what they name. Pure data here; each format applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import validate_name

# The Hive metastore's own limits: TABLE_PARAMS.PARAM_VALUE and COLUMNS_V2.COMMENT (Hive 2.3 schema).
MAX_TABLE_COMMENT = 4000
MAX_COLUMN_COMMENT = 256


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise InvalidInputError(f"{what} is {len(value)} characters long; the metastore keeps at most {limit}")
    if any(not c.isprintable() and c not in "\n\t" for c in value):
        raise InvalidInputError(f"{what} contains a control character")
    return value


@dataclass(frozen=True)
class Comments:
    table: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.table is not None or bool(self.columns)

    def over(self, existing: Comments, columns: Iterable[str]) -> Comments:
        """These comments on top of ``existing``, for a table with ``columns``: a given comment
        wins, an existing one stays where its column does."""
        names = {c.lower() for c in columns}
        kept = {c: text for c, text in existing.columns.items() if c in names}
        return Comments(
            table=self.table if self.table is not None else existing.table,
            columns={**kept, **self.columns},
        )

    def changes_to(self, current: Comments) -> Comments:
        """What must be set on a table whose comments are ``current`` to give it these."""
        table = self.table if self.table is not None and self.table != current.table else None
        columns = {c: text for c, text in self.columns.items() if current.columns.get(c) != text}
        return Comments(table=table, columns=columns)

    def require_columns(self, columns: Iterable[str]) -> None:
        """Refuse a comment for a column the query does not produce (a typo, before any write)."""
        names = {c.lower() for c in columns}
        unknown = sorted(c for c in self.columns if c not in names)
        if unknown:
            raise InvalidInputError(
                f"column_comments names {unknown}, which the query does not produce (its columns: {sorted(names)})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "columns": dict(self.columns)}

    @classmethod
    def from_dict(cls, data: object) -> Comments:
        if not isinstance(data, Mapping) or set(data) != {"table", "columns"}:
            raise InvalidInputError("comments must be an object with 'table' and 'columns'")
        return validate_comments(data["table"], data["columns"])


def validate_comments(comment: object, column_comments: object) -> Comments:
    """The operator's ``comment=`` and ``column_comments=``; None leaves a comment as it is."""
    table = None if comment is None else _text(comment, "comment", MAX_TABLE_COMMENT)
    if column_comments is None:
        return Comments(table=table)
    if not isinstance(column_comments, Mapping):
        raise InvalidInputError(
            f"column_comments must be a dict of column name to comment, got {type(column_comments).__name__}"
        )
    columns: dict[str, str] = {}
    for name, text in column_comments.items():
        column = validate_name(name, "column_comments key")
        if column in columns:
            raise InvalidInputError(f"column_comments names {column!r} twice (column names are case-insensitive)")
        columns[column] = _text(text, f"the comment of column {column!r}", MAX_COLUMN_COMMENT)
    return Comments(table=table, columns=columns)
