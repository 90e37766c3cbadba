"""Audit checks: assertions on the staged version, evaluated after prepare and before commit.

The two-phase shape means the new version exists, complete and queryable, before anyone can see
it (write-audit-publish). A check is data, not code: it travels to the driver as JSON with the
request and is rebuilt there from an allowlist of types, like the transaction itself. A failed
check publishes nothing (``AUDIT_FAILED``).

Custom SQL refers to the relations a check can see by placeholders that the operator's templating
renders to reserved view names: ``{{ staged }}`` (what this run wrote: for ``overwrite_partitions``
only the partitions it replaces), ``{{ published }}`` (the target as readers see it now; empty when
there is none) and ``{{ result }}`` (the whole table as it will be once published).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.identifiers import validate_columns, validate_name

STAGED_VIEW = "__airflow_ctas_staged__"
PUBLISHED_VIEW = "__airflow_ctas_published__"
RESULT_VIEW = "__airflow_ctas_result__"
PLACEHOLDERS: Mapping[str, str] = {"staged": STAGED_VIEW, "published": PUBLISHED_VIEW, "result": RESULT_VIEW}
"""Jinja names a custom check's SQL may use, and the views they render to."""

SCOPES = ("staged", "result")
MAX_CHECKS = 100
MAX_ACCEPTED_VALUES = 1000
MAX_SQL_LENGTH = 100_000


def _scope(value: object) -> str:
    if value not in SCOPES:
        raise InvalidInputError(f"check scope must be one of {', '.join(SCOPES)}, got {value!r}")
    return str(value)


def _count(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def _ratio(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{what} must be a non-negative number, got {value!r}")
    return float(value)


def _literal_value(value: object, what: str) -> str | int | float | bool:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{what}: {value!r} is not a finite number")
    if not isinstance(value, str | int | float | bool):
        raise InvalidInputError(f"{what} must be strings, numbers or booleans, got {type(value).__name__}")
    return value


@dataclass
class Check:
    """Base class. ``name`` identifies the check in logs, XCom and provenance (unique per task)."""

    type: ClassVar[str] = ""
    fields: ClassVar[tuple[str, ...]] = ()
    """The type's own fields in its dict form (besides ``type``, ``name`` and ``scope``)."""
    measured_in_write: ClassVar[bool] = False
    """Whether one aggregate over the written rows decides it, so the write itself measures it (a
    distinct count or another query cannot ride on a write)."""
    name: str = field(default="", kw_only=True)
    scope: str = field(default="staged", kw_only=True)
    """``staged``: the data this run wrote; ``result``: the whole table as it will be after the publish
    (they differ only for ``overwrite_partitions``, where the other partitions stay)."""

    def __post_init__(self) -> None:
        self.scope = _scope(self.scope)
        self.validate()
        if not self.name:
            self.name = self.default_name()
        if not isinstance(self.name, str) or not 0 < len(self.name) <= 200 or not self.name.isprintable():
            raise InvalidInputError(f"check name must be printable text of 1 to 200 characters, got {self.name!r}")

    def validate(self) -> None:
        """Normalize and check the fields; raise InvalidInputError with what is wrong."""

    def default_name(self) -> str:
        return self.type

    def columns(self) -> tuple[str, ...]:
        """Columns of the written data the check reads (checked against the query in begin)."""
        return ()

    def params(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "name": self.name, "scope": self.scope, **self.params()}


@dataclass
class RowCount(Check):
    """The number of rows lies within ``[min, max]`` (either bound optional)."""

    type: ClassVar[str] = "row_count"
    measured_in_write: ClassVar[bool] = True
    fields: ClassVar[tuple[str, ...]] = ("min", "max")
    min: int | None = None
    max: int | None = None

    def validate(self) -> None:
        self.min, self.max = _count(self.min, "RowCount min"), _count(self.max, "RowCount max")
        if self.min is None and self.max is None:
            raise InvalidInputError("RowCount needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise InvalidInputError(f"RowCount min {self.min} is above max {self.max}")

    def params(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max}


@dataclass(init=False)
class NotNull(Check):
    """No row has a NULL in any of ``columns``."""

    type: ClassVar[str] = "not_null"
    measured_in_write: ClassVar[bool] = True
    fields: ClassVar[tuple[str, ...]] = ("columns",)
    column_names: tuple[str, ...] = ()

    def __init__(self, *columns: str, name: str = "", scope: str = "staged") -> None:
        self.column_names, self.name, self.scope = tuple(columns), name, scope
        self.__post_init__()

    def validate(self) -> None:
        self.column_names = validate_columns(self.column_names, f"{type(self).__name__} columns")
        if not self.column_names:
            raise InvalidInputError(f"{type(self).__name__} needs at least one column")

    def default_name(self) -> str:
        return f"{self.type}({','.join(self.column_names)})"

    def columns(self) -> tuple[str, ...]:
        return self.column_names

    def params(self) -> dict[str, Any]:
        return {"columns": list(self.column_names)}


@dataclass(init=False)
class Unique(NotNull):
    """No two rows share the same values of ``columns`` (rows with a NULL in them are not compared,
    as in SQL's UNIQUE); several columns form one composite key."""

    type: ClassVar[str] = "unique"
    measured_in_write: ClassVar[bool] = False


@dataclass
class AcceptedValues(Check):
    """Every non-NULL value of ``column`` is one of ``values``."""

    type: ClassVar[str] = "accepted_values"
    measured_in_write: ClassVar[bool] = True
    fields: ClassVar[tuple[str, ...]] = ("column", "values")
    column: str = ""
    values: Sequence[str | int | float | bool] = ()

    def validate(self) -> None:
        self.column = validate_name(self.column, "AcceptedValues column")
        if isinstance(self.values, str | bytes) or not isinstance(self.values, Iterable):
            raise InvalidInputError("AcceptedValues values must be a list")
        values = [_literal_value(v, "AcceptedValues values") for v in self.values]
        if not values or len(values) > MAX_ACCEPTED_VALUES:
            raise InvalidInputError(f"AcceptedValues needs 1 to {MAX_ACCEPTED_VALUES} values")
        self.values = tuple(values)

    def default_name(self) -> str:
        return f"{self.type}({self.column})"

    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def params(self) -> dict[str, Any]:
        return {"column": self.column, "values": list(self.values)}


@dataclass
class ValueRange(Check):
    """Every non-NULL value of ``column`` lies within ``[min, max]`` (either bound optional; numbers,
    or strings that Spark compares as the column's type, e.g. dates)."""

    type: ClassVar[str] = "value_range"
    measured_in_write: ClassVar[bool] = True
    fields: ClassVar[tuple[str, ...]] = ("column", "min", "max")
    column: str = ""
    min: str | int | float | None = None
    max: str | int | float | None = None

    def validate(self) -> None:
        self.column = validate_name(self.column, "ValueRange column")
        for bound in (self.min, self.max):
            if isinstance(bound, bool):
                raise InvalidInputError(f"ValueRange bounds must be numbers or strings, got {bound!r}")
            if bound is not None:
                _literal_value(bound, "ValueRange bounds")
        if self.min is None and self.max is None:
            raise InvalidInputError("ValueRange needs min, max or both")
        numbers = all(isinstance(b, int | float) for b in (self.min, self.max))
        if numbers and self.min is not None and self.max is not None and self.min > self.max:  # type: ignore[operator]
            raise InvalidInputError(f"ValueRange min {self.min} is above max {self.max}")

    def default_name(self) -> str:
        return f"{self.type}({self.column})"

    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def params(self) -> dict[str, Any]:
        return {"column": self.column, "min": self.min, "max": self.max}


@dataclass
class RowCountChange(Check):
    """New rows / published rows lies within ``[min_ratio, max_ratio]``: with scope ``staged`` the
    same slice of the published table (for ``overwrite_partitions``: the partitions being replaced),
    with ``result`` the whole table. Passes, saying so, when nothing is published to compare with."""

    type: ClassVar[str] = "row_count_change"
    measured_in_write: ClassVar[bool] = True
    fields: ClassVar[tuple[str, ...]] = ("min_ratio", "max_ratio")
    min_ratio: float | None = None
    max_ratio: float | None = None

    def validate(self) -> None:
        self.min_ratio = _ratio(self.min_ratio, "RowCountChange min_ratio")
        self.max_ratio = _ratio(self.max_ratio, "RowCountChange max_ratio")
        if self.min_ratio is None and self.max_ratio is None:
            raise InvalidInputError("RowCountChange needs min_ratio, max_ratio or both")
        if self.min_ratio is not None and self.max_ratio is not None and self.min_ratio > self.max_ratio:
            raise InvalidInputError(f"RowCountChange min_ratio {self.min_ratio} is above max_ratio {self.max_ratio}")

    def params(self) -> dict[str, Any]:
        return {"min_ratio": self.min_ratio, "max_ratio": self.max_ratio}


@dataclass
class SqlCheck(Check):
    """A query that returns the offending rows: the check passes when it returns none.

    ``sql`` is templated; it reads ``{{ staged }}``, ``{{ published }}`` or ``{{ result }}`` (and
    any other table). Like the main query it must be one query (it runs as a subquery)."""

    type: ClassVar[str] = "sql"
    fields: ClassVar[tuple[str, ...]] = ("sql",)
    template_fields: ClassVar[Sequence[str]] = ("sql",)
    sql: str = ""

    def validate(self) -> None:
        if not isinstance(self.sql, str) or not self.sql.strip():
            raise InvalidInputError(f"SqlCheck {self.name or ''} needs sql (a query returning the offending rows)")
        if len(self.sql) > MAX_SQL_LENGTH:
            raise InvalidInputError(f"SqlCheck sql is longer than {MAX_SQL_LENGTH} characters")
        if not self.name:
            raise InvalidInputError("SqlCheck needs a name (it identifies the check in logs and XCom)")

    def params(self) -> dict[str, Any]:
        return {"sql": self.sql}


CHECK_TYPES: Mapping[str, type[Check]] = {
    cls.type: cls for cls in (RowCount, NotNull, Unique, AcceptedValues, ValueRange, RowCountChange, SqlCheck)
}


def check_from_dict(data: object) -> Check:
    """Rebuild a check from its dict form (user input or the wire); the type comes from the allowlist."""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"a check must be a Check or a dict, got {type(data).__name__}")
    kind = data.get("type")
    cls = CHECK_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InvalidInputError(f"unknown check type {kind!r}; use one of: {', '.join(CHECK_TYPES)}")
    fields_ = {k: v for k, v in data.items() if k != "type"}
    allowed = {"name", "scope", *cls.fields}
    unknown = sorted(set(fields_) - allowed)
    if unknown:
        raise InvalidInputError(f"check type {kind!r} has no field(s) {', '.join(map(str, unknown))}")
    if cls in (NotNull, Unique):
        columns = fields_.pop("columns", ())
        if isinstance(columns, str) or not isinstance(columns, Iterable):
            raise InvalidInputError(f"{kind} columns must be a list of column names")
        return cls(*columns, **fields_)
    return cls(**fields_)


def validate_checks(checks: object) -> tuple[Check, ...]:
    """Checks given as objects or dicts, validated; names must be unique."""
    if checks is None:
        return ()
    if isinstance(checks, Check | Mapping | str) or not isinstance(checks, Iterable):
        raise InvalidInputError("checks must be a list of checks")
    result = [c if isinstance(c, Check) else check_from_dict(c) for c in checks]
    if len(result) > MAX_CHECKS:
        raise InvalidInputError(f"at most {MAX_CHECKS} checks per task")
    for check in result:
        # A Check object built before templating can have been changed since: validate it again.
        check.validate()
    names = [c.name for c in result]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidInputError(f"check names must be unique; repeated: {', '.join(duplicates)}")
    return tuple(result)


def checks_from_wire(data: object) -> tuple[Check, ...]:
    """The request's checks; anything malformed is a corrupt request, not user input."""
    try:
        return validate_checks(data)
    except InvalidInputError as exc:
        raise CorruptStateError(f"request checks are invalid: {exc}") from exc


@dataclass
class CheckResult:
    """What one check measured, for the log, XCom and provenance."""

    name: str
    type: str
    scope: str
    passed: bool
    value: int | float | None
    expected: str
    note: str = ""
    sample: list[dict[str, str]] = field(default_factory=list)

    def describe(self) -> str:
        text = f"{self.name}: {'passed' if self.passed else 'FAILED'} (measured {self.value}, expected {self.expected})"
        if self.note:
            text += f"; {self.note}"
        if self.sample:
            text += f"; sample: {self.sample}"
        return text


def summary(results: Sequence[CheckResult], limit: int = 3900) -> str:
    """One line for the published table's provenance property."""
    passed = sum(r.passed for r in results)
    text = f"{passed}/{len(results)} passed: " + "; ".join(f"{r.name}={r.value}" for r in results)
    return text if len(text) <= limit else text[: limit - 3] + "..."
