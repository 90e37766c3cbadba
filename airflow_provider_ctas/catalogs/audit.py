"""The audit phase: checks evaluated on the staged version, inside the run that wrote it.

Strategy-neutral: a strategy names its staged table, the published target (if any) and, for a
partition overwrite, the partition columns; the checks see them through temporary views
(``core.checks``: staged, published, result). Built-in checks of one scope share one aggregate
query (one scan of the staged data; each ``Unique`` adds a distinct count, i.e. one shuffle);
each custom SQL check is one query. Offending rows are sampled only for a check that failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.query import as_subquery
from airflow_provider_ctas.core.checks import (
    PUBLISHED_VIEW,
    RESULT_VIEW,
    STAGED_VIEW,
    AcceptedValues,
    Check,
    CheckResult,
    NotNull,
    RowCount,
    RowCountChange,
    SqlCheck,
    Unique,
    ValueRange,
)
from airflow_provider_ctas.core.errors import AuditFailedError, QueryError
from airflow_provider_ctas.core.identifiers import quote, sql_string_literal
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_ctas.spark.engine import Engine, Reporter

SAMPLE_ROWS = 5
MEASURED_BY_THE_WRITE = "measured by the write"
"""A result's note when its counts came from the write's observed metrics (no scan after it)."""
SAMPLE_COLUMNS = 20
SAMPLE_VALUE_CHARS = 100


@dataclass(frozen=True)
class Measured:
    """What the write itself observed (``write_observation``): the rows it wrote, and the counts of
    each built-in check it measured, by check name, as ``aggregates`` lists them."""

    rows: int
    counts: Mapping[str, Sequence[int]]


@dataclass(frozen=True)
class AuditTarget:
    """What the checks look at: quoted table names and the written columns, in table order."""

    staged: str
    published: str | None
    columns: Sequence[str]
    replaced_partitions_of: Sequence[str] = ()
    """Partition columns (or an Iceberg table's transforms) when only the staged partitions replace
    the published ones (``overwrite_partitions`` into an existing table); empty when the staged data
    is the whole table."""
    partition_value: Callable[[str, str], str] = field(default=lambda entry, alias: f"{alias}.{quote(entry)}")
    """SQL for the partition value of a row of table ``alias`` under one entry of ``replaced_partitions_of``."""
    label: str = ""
    """How the run's report names what was staged, when ``staged`` is only a view over it."""

    def same_partition(self, left: str, right: str) -> str:
        value = self.partition_value
        return " AND ".join(f"{value(e, left)} <=> {value(e, right)}" for e in self.replaced_partitions_of)


def _literal(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return sql_string_literal(value)
    return repr(value)


def _any_null(columns: Sequence[str]) -> str:
    return " OR ".join(f"{quote(c)} IS NULL" for c in columns)


def _all_present(columns: Sequence[str]) -> str:
    return " AND ".join(f"{quote(c)} IS NOT NULL" for c in columns)


def _outside(check: AcceptedValues) -> str:
    values = ", ".join(_literal(v) for v in check.values)
    return f"{quote(check.column)} IS NOT NULL AND {quote(check.column)} NOT IN ({values})"


def _out_of_range(check: ValueRange) -> str:
    column = quote(check.column)
    bounds = [f"{column} {op} {_literal(b)}" for op, b in (("<", check.min), (">", check.max)) if b is not None]
    return f"{column} IS NOT NULL AND ({' OR '.join(bounds)})"


def violations(check: Check) -> str | None:
    """A built-in check's condition on one row, for the checks that count offending rows."""
    if isinstance(check, NotNull) and not isinstance(check, Unique):
        return _any_null(check.column_names)
    if isinstance(check, AcceptedValues):
        return _outside(check)
    if isinstance(check, ValueRange):
        return _out_of_range(check)
    return None


def aggregates(check: Check) -> list[str]:
    """The counts a built-in check needs from the shared aggregate query (RowCount* need only the
    row count every such query computes)."""
    if isinstance(check, Unique):
        cols = ", ".join(quote(c) for c in check.column_names)
        return [f"count_if({_all_present(check.column_names)})", f"count(DISTINCT {cols})"]
    condition = violations(check)
    return [f"count_if({condition})"] if condition else []


def _expected_list(values: Sequence[object], limit: int = 10) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


class Auditor:
    def __init__(self, spark: SparkSession, checks: Sequence[Check], target: AuditTarget) -> None:
        self.spark, self.checks, self.target = spark, tuple(checks), target

    # -- views ---------------------------------------------------------------------------------

    def define_views(self) -> None:
        """(Re)define the views the checks read; cheap (no job), done in audit (and in begin when a
        custom query must analyse over them)."""
        t = self.target
        cols = ", ".join(quote(c) for c in t.columns)
        published = f"SELECT * FROM {t.published}" if t.published else f"SELECT * FROM {t.staged} WHERE false"
        if t.published and t.replaced_partitions_of:
            same = t.same_partition("s", "p")
            result = (
                f"SELECT {cols} FROM {t.published} AS p WHERE NOT EXISTS "
                f"(SELECT 1 FROM {t.staged} AS s WHERE {same}) UNION ALL SELECT {cols} FROM {t.staged}"
            )
        else:
            result = f"SELECT {cols} FROM {t.staged}"
        for view, query in ((STAGED_VIEW, f"SELECT {cols} FROM {t.staged}"), (PUBLISHED_VIEW, published)):
            self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {quote(view)} AS {query}")
        self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {quote(RESULT_VIEW)} AS {result}")

    def drop_views(self) -> None:
        for view in (STAGED_VIEW, PUBLISHED_VIEW, RESULT_VIEW):
            self.spark.sql(f"DROP VIEW IF EXISTS {quote(view)}")

    def _view(self, scope: str) -> str:
        partial = bool(self.target.published and self.target.replaced_partitions_of)
        return quote(RESULT_VIEW if scope == "result" and partial else STAGED_VIEW)

    # -- begin: analyse without running --------------------------------------------------------

    def analyse(self) -> None:
        """Every check refers to columns the query produces and every custom query analyses (over
        the views, defined only for that: three statements a begin without one is spared); no job runs."""
        from pyspark.errors import AnalysisException, ParseException

        produced = set(self.target.columns)
        for check in self.checks:
            missing = [c for c in check.columns() if c not in produced]
            if missing:
                raise QueryError(f"check {check.name!r} names column(s) the query does not produce: {missing}")
        if any(isinstance(check, SqlCheck) for check in self.checks):
            self.define_views()
        for check in self.checks:
            if isinstance(check, SqlCheck):
                try:
                    self.spark.sql(as_subquery(check.sql)).schema  # noqa: B018 - analysis only
                except (ParseException, AnalysisException) as exc:
                    raise QueryError(f"check {check.name!r} is not a valid query: {first_line(exc)}") from exc

    # -- audit ---------------------------------------------------------------------------------

    def run(self, progress: Callable[[str], None], measured: Measured | None = None) -> list[CheckResult]:
        """Every check's result; built-in checks the write already measured (``measured``) cost no
        scan, the others of one view share one aggregate query."""
        results: dict[str, CheckResult] = {}
        for view in sorted({self._view(c.scope) for c in self.checks}):
            builtins = [c for c in self.checks if not isinstance(c, SqlCheck) and self._view(c.scope) == view]
            if measured is not None and view == quote(STAGED_VIEW):
                known = [c for c in builtins if c.name in measured.counts]
                started = time.monotonic()
                for check in known:
                    result = self._evaluate(check, view, measured.rows, list(measured.counts[check.name]))
                    result.note = "; ".join(filter(None, (result.note, MEASURED_BY_THE_WRITE)))
                    results[check.name] = result
                if known:
                    progress(
                        f"{len(known)} built-in check(s) on {view} measured while the data was written "
                        f"(no scan of it), {time.monotonic() - started:.2f}s"
                    )
                builtins = [c for c in builtins if c.name not in results]
            if builtins:
                started = time.monotonic()
                for result in self._builtins(view, builtins):
                    results[result.name] = result
                progress(f"{len(builtins)} built-in check(s) on {view} in one query, {time.monotonic() - started:.2f}s")
        for check in self.checks:
            if isinstance(check, SqlCheck):
                started = time.monotonic()
                results[check.name] = self._custom(check)
                progress(f"check {check.name!r} in {time.monotonic() - started:.2f}s")
        return [results[c.name] for c in self.checks]

    def _builtins(self, view: str, checks: Sequence[Check]) -> list[CheckResult]:
        """One aggregate query for every built-in check on ``view``: the row count, then each
        check's own counts (a ``Unique``: rows with a full key, and distinct keys)."""
        counted = ["count(1)"]
        for check in checks:
            counted += aggregates(check)
        select = ", ".join(f"{expr} AS a{i}" for i, expr in enumerate(counted))
        row = self.spark.sql(f"SELECT {select} FROM {view}").collect()[0]
        values = iter(int(row[f"a{i}"] or 0) for i in range(len(counted)))
        rows = next(values)
        return [self._evaluate(check, view, rows, [next(values) for _ in aggregates(check)]) for check in checks]

    def _evaluate(self, check: Check, view: str, rows: int, counts: list[int]) -> CheckResult:
        if isinstance(check, Unique):
            return self._measured(check, view, counts[0] - counts[1], "0 duplicate rows")
        if isinstance(check, NotNull):
            return self._measured(check, view, counts[0], "0 rows with a NULL")
        if isinstance(check, AcceptedValues):
            return self._measured(check, view, counts[0], f"0 rows outside {_expected_list(list(check.values))}")
        if isinstance(check, ValueRange):
            low, high = check.min if check.min is not None else "any", check.max if check.max is not None else "any"
            return self._measured(check, view, counts[0], f"0 rows outside [{low!r}, {high!r}]")
        if isinstance(check, RowCount):
            return _row_count(check, rows)
        assert isinstance(check, RowCountChange)
        return self._change(check, rows)

    def _measured(self, check: Check, view: str, violations: int, expected: str) -> CheckResult:
        result = CheckResult(check.name, check.type, check.scope, violations == 0, violations, expected)
        if violations:
            result.sample = self._sample(self._offending(check, view))
        return result

    def _offending(self, check: Check, view: str) -> str:
        if isinstance(check, Unique):
            cols = ", ".join(quote(c) for c in check.column_names)
            return (
                f"SELECT {cols}, count(1) AS rows FROM {view} WHERE {_all_present(check.column_names)} "
                f"GROUP BY {cols} HAVING count(1) > 1"
            )
        return f"SELECT * FROM {view} WHERE {violations(check)}"

    def _sample(self, query: str) -> list[dict[str, str]]:
        rows = self.spark.sql(f"SELECT * FROM ({query}) AS __ctas_sample LIMIT {SAMPLE_ROWS}").collect()
        return [
            {k: str(v)[:SAMPLE_VALUE_CHARS] for k, v in list(row.asDict().items())[:SAMPLE_COLUMNS]} for row in rows
        ]

    def _change(self, check: RowCountChange, rows: int) -> CheckResult:
        published = self._published_rows(check.scope)
        bounds = f"[{check.min_ratio if check.min_ratio is not None else 0}, {check.max_ratio or 'any'}]"
        expected = f"new/published rows in {bounds}"
        if not published:
            return CheckResult(
                check.name, check.type, check.scope, True, None, expected, note="nothing published to compare with"
            )
        ratio = rows / published
        passed = (check.min_ratio is None or ratio >= check.min_ratio) and (
            check.max_ratio is None or ratio <= check.max_ratio
        )
        note = f"{rows} rows now, {published} published"
        return CheckResult(check.name, check.type, check.scope, passed, round(ratio, 4), expected, note=note)

    def _published_rows(self, scope: str) -> int:
        t = self.target
        if not t.published:
            return 0
        if scope == "staged" and t.replaced_partitions_of:
            same = t.same_partition("s", "p")
            replaced = f"EXISTS (SELECT 1 FROM {t.staged} AS s WHERE {same})"
            query = f"SELECT count(1) AS n FROM {t.published} AS p WHERE {replaced}"
        else:
            query = f"SELECT count(1) AS n FROM {t.published}"
        return int(self.spark.sql(query).collect()[0]["n"])

    def _custom(self, check: SqlCheck) -> CheckResult:
        query = as_subquery(check.sql)
        found = int(self.spark.sql(f"SELECT count(1) AS n FROM ({query}) AS __ctas_check").collect()[0]["n"])
        result = CheckResult(check.name, check.type, check.scope, found == 0, found, "0 rows")
        if found:
            result.sample = self._sample(query)
        return result


def _row_count(check: RowCount, rows: int) -> CheckResult:
    passed = (check.min is None or rows >= check.min) and (check.max is None or rows <= check.max)
    low, high = check.min if check.min is not None else 0, check.max if check.max is not None else "any"
    expected = f"between {low} and {high}"
    return CheckResult(check.name, check.type, check.scope, passed, rows, expected)


def run_audit(
    auditor: Auditor, engine: Engine, log: Reporter, label: str, measured: Measured | None = None
) -> list[CheckResult]:
    """The audit phase of every strategy: the checks run on the staged version, each result logged.
    The caller raises (``raise_if_failed``) once it has recorded them."""
    auditor.define_views()
    with engine.progress(f"audit {label}", log):
        results = auditor.run(lambda message: log.info(f"audit: {message}"), measured)
    auditor.drop_views()
    for result in results:
        (log.info if result.passed else log.warning)(f"audit: {result.describe()}")
    return results


def raise_if_failed(results: Sequence[CheckResult]) -> None:
    failed = [r for r in results if not r.passed]
    if failed:
        raise AuditFailedError(
            f"{len(failed)} of {len(results)} check(s) failed, nothing was published: "
            + " | ".join(r.describe() for r in failed)
        )


def results_to_details(results: Sequence[CheckResult]) -> list[dict[str, Any]]:
    return [vars(r) | {"sample": list(r.sample)} for r in results]
