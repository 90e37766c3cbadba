"""Validation and quoting of every name that reaches Spark SQL.

Names are checked against a strict allowlist before any Spark work, and are always emitted
backtick-quoted, so a name can never change the shape of a statement. The allowlist is what the
Hive metastore itself accepts for database and table names (``[A-Za-z0-9_]``); Spark lowercases
them, so we do too, which keeps ownership markers comparable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_provider_ctas.core.errors import InvalidInputError

SESSION_CATALOG = "spark_catalog"
DEFAULT_DATABASE = "default"
RESERVED_PREFIX = "__ctas_"
MAX_NAME_LENGTH = 128

_NAME = re.compile(r"[A-Za-z0-9_]+")
_PROPERTY_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]*")
MAX_PROPERTY_KEY_LENGTH = 256
MAX_PROPERTY_VALUE_LENGTH = 4000

# Spark rejects these in TBLPROPERTIES (TableCatalog.RESERVED_PROPERTIES); measured on 4.3.0:
# "owner is a reserved table property, it will be set to the current user".
SPARK_RESERVED_PROPERTIES = frozenset(
    {"comment", "location", "provider", "owner", "external", "is_managed_location", "collation"}
)
PROVIDER_PROPERTY_PREFIX = "airflow_ctas."


def _describe_bad_chars(text: str) -> str:
    bad = sorted({c for c in text if not (c.isascii() and (c.isalnum() or c == "_"))})
    shown = ", ".join(repr(c) for c in bad[:5])
    return f"contains {shown}" if bad else "is empty"


def validate_name(name: object, what: str) -> str:
    """Return ``name`` lowercased, or raise a message that says exactly what is wrong."""
    if not isinstance(name, str):
        raise InvalidInputError(f"{what} must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidInputError(f"{what} is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInputError(f"{what} {name[:40]!r}... is longer than {MAX_NAME_LENGTH} characters")
    if not _NAME.fullmatch(name):
        raise InvalidInputError(
            f"{what} {name!r} {_describe_bad_chars(name)}; only letters, digits and '_' are allowed"
        )
    return name.lower()


def quote(name: str) -> str:
    """Backtick-quote one identifier part; doubling backticks keeps this safe for any text."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True, order=True)
class TableRef:
    """A table in Spark's session catalog: ``catalog.database.table``, all parts validated."""

    database: str
    table: str
    catalog: str = SESSION_CATALOG

    @classmethod
    def parse(cls, text: object, what: str = "target_table", *, named_catalog: bool = False) -> TableRef:
        """``named_catalog``: the name must be ``catalog.database.table`` in a catalog other than
        Spark's session catalog (a format's own catalog, e.g. Iceberg's ``SparkCatalog``)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"{what} must be a string, got {type(text).__name__}")
        stripped = text.strip()
        if not stripped:
            raise InvalidInputError(f"{what} is empty")
        parts = stripped.split(".")
        if len(parts) > 3:
            raise InvalidInputError(
                f"{what} {text!r} has {len(parts)} parts; use table, database.table or {SESSION_CATALOG}.database.table"
            )
        for i, part in enumerate(parts):
            if not part:
                raise InvalidInputError(f"{what} {text!r} has an empty part at position {i + 1}")
        if named_catalog:
            return cls._in_named_catalog(text, parts, what)
        if len(parts) == 3:
            catalog = validate_name(parts[0], f"catalog of {what}")
            if catalog != SESSION_CATALOG:
                raise InvalidInputError(
                    f"{what} {text!r} names catalog {parts[0]!r}; only Spark's session catalog "
                    f"({SESSION_CATALOG!r}) is supported"
                )
            parts = parts[1:]
        if len(parts) == 1:
            parts = [DEFAULT_DATABASE, parts[0]]
        database = validate_name(parts[0], f"database of {what}")
        table = validate_name(parts[1], f"table of {what}")
        return cls(database=database, table=table)

    @classmethod
    def _in_named_catalog(cls, text: str, parts: list[str], what: str) -> TableRef:
        if len(parts) != 3:
            raise InvalidInputError(
                f"{what} {text!r} must name its catalog: catalog.database.table (the catalog configured "
                "as spark.sql.catalog.<catalog>)"
            )
        catalog = validate_name(parts[0], f"catalog of {what}")
        if catalog == SESSION_CATALOG:
            raise InvalidInputError(
                f"{what} {text!r} is in Spark's session catalog; this table format needs its own catalog "
                "(spark.sql.catalog.<name>), named as <name>.database.table"
            )
        return cls(
            database=validate_name(parts[1], f"database of {what}"),
            table=validate_name(parts[2], f"table of {what}"),
            catalog=catalog,
        )

    def with_table(self, table: str) -> TableRef:
        return TableRef(database=self.database, table=validate_name(table, "table"), catalog=self.catalog)

    @property
    def qualified(self) -> str:
        return f"{self.catalog}.{self.database}.{self.table}"

    @property
    def quoted(self) -> str:
        return f"{quote(self.catalog)}.{quote(self.database)}.{quote(self.table)}"

    def __str__(self) -> str:
        return self.qualified


def validate_target(text: object, *, named_catalog: bool = False) -> TableRef:
    ref = TableRef.parse(text, named_catalog=named_catalog)
    if ref.table.startswith(RESERVED_PREFIX):
        raise InvalidInputError(
            f"target_table {text!r} uses the prefix {RESERVED_PREFIX!r}, reserved for this provider's staging tables"
        )
    return ref


def validate_columns(columns: object, what: str) -> tuple[str, ...]:
    """Validate a list of column names (partitioning); duplicates are an error, order is kept."""
    if columns is None:
        return ()
    if isinstance(columns, str) or not isinstance(columns, Iterable):
        raise InvalidInputError(f"{what} must be a list of column names, got {type(columns).__name__}")
    seen: list[str] = []
    for column in columns:
        name = validate_name(column, f"column in {what}")
        if name in seen:
            raise InvalidInputError(f"{what} names column {name!r} twice")
        seen.append(name)
    return tuple(seen)


def validate_table_properties(properties: object) -> dict[str, str]:
    """Validate user table properties; keys are restricted, values are any printable text."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise InvalidInputError(f"table_properties must be a dict, got {type(properties).__name__}")
    result: dict[str, str] = {}
    for key, value in properties.items():
        _validate_property_key(key)
        text = _property_value(key, value)
        if key.lower() in (k.lower() for k in result):
            raise InvalidInputError(f"table property {key!r} is given twice (keys are case-insensitive)")
        result[key] = text
    return result


def _validate_property_key(key: object) -> None:
    if not isinstance(key, str) or not _PROPERTY_KEY.fullmatch(key):
        raise InvalidInputError(
            f"table property key {key!r} is not allowed; use letters, digits and '_', '.', ':', '-' "
            "(starting with a letter, digit or '_')"
        )
    if len(key) > MAX_PROPERTY_KEY_LENGTH:
        raise InvalidInputError(f"table property key {key[:40]!r}... is too long")
    lowered = key.lower()
    if lowered == "comment":
        raise InvalidInputError("the table's comment is not a table property here: pass comment= to the operator")
    if lowered in SPARK_RESERVED_PROPERTIES:
        raise InvalidInputError(
            f"table property {key!r} is reserved by Spark and cannot be set through TBLPROPERTIES "
            f"(Spark sets it itself); choose another key, e.g. 'team' instead of 'owner'"
        )
    if lowered.startswith(PROVIDER_PROPERTY_PREFIX):
        raise InvalidInputError(
            f"table property {key!r} uses the prefix {PROVIDER_PROPERTY_PREFIX!r}, reserved for "
            "this provider's ownership and provenance markers"
        )
    if lowered.startswith("spark.sql."):
        raise InvalidInputError(f"table property {key!r} is reserved for Spark's own table metadata")


def _property_value(key: str, value: object) -> str:
    if not isinstance(value, str | int | float | bool):
        raise InvalidInputError(f"table property {key!r} must have a string value, got {type(value).__name__}")
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if len(text) > MAX_PROPERTY_VALUE_LENGTH:
        raise InvalidInputError(f"table property {key!r} is longer than {MAX_PROPERTY_VALUE_LENGTH} characters")
    if any(not c.isprintable() for c in text):
        raise InvalidInputError(f"table property {key!r} contains a control character")
    return text


def sql_string_literal(text: str) -> str:
    """Quote text as a Spark SQL string literal.

    Correct only with ``spark.sql.parser.escapedStringLiterals=false`` (Spark's default), which the
    Spark application forces for its own session.
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
