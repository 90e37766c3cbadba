"""Built-in checks decided by the write itself, so they cost no second scan of what was just written.

A check on each row (NULLs, accepted values, value ranges) is a guard in the query that writes the
staged version: an expression in its generated code that fails the write at the first offending row.
The rows are counted by the write command's own metrics where it reports them, else by Spark's
observed metrics on the same write. Observed metrics could count the offending rows too, but Spark
evaluates them row by row outside the generated code, which costs a write several times what the
guards do (``benchmarks/write_checks.py`` measures each form; docs/costs.md lists its runs).

A guard that stops a write leaves a failed check without its counts and sample rows, so the write
runs again without guards, counting every check's offending rows as observed metrics, and the audit
reports them as for any failed check: a failing check costs a second write, a passing one nothing.

Only what one aggregate over the written rows decides goes here. ``Unique`` needs a distinct count;
custom SQL and a ``result``-scope check of a partition overwrite read other data: the audit phase
runs those. A check reads a column here only where the query's type is the staged column's, so it
decides on the values stored, not ones a cast on the way in could still change. Whatever the write
did not decide the audit measures with its own query.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_ctas.catalogs.audit import Measured, aggregates, violations
from airflow_provider_ctas.core.checks import Check
from airflow_provider_ctas.core.errors import AuditFailedError
from airflow_provider_ctas.core.identifiers import quote
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Reporter

NAME = "airflow_ctas_written"
GUARD = "airflow-ctas-check-violated:"
"""The message a guard fails the write with, followed by the index of the check among the guarded."""
_TRIPPED = re.compile(re.escape(GUARD) + r"(\d+)")
R = TypeVar("R")


def measurable(check: Check, partial: bool) -> bool:
    """Whether the written rows alone decide ``check`` (``partial``: the staged rows replace only
    some partitions of a published table, so a ``result``-scope check needs the rest too)."""
    return check.measured_in_write and (check.scope == "staged" or not partial)


class WriteObservation:
    """Attached to the frame a try writes; after the write, what it measured."""

    def __init__(self, checks: Sequence[Check], partial: bool) -> None:
        self.checks = [c for c in checks if measurable(c, partial)]
        self.guarding = True
        """False once a guard stopped a write: the next one counts every check's offending rows."""
        self.attached = False
        self.observation: Any = None
        self.observed: list[Check] = []
        self.guarded: list[Check] = []
        self.measured: Measured | None = None

    def attach(self, frame: DataFrame, staged: StructType | None, rows_reported: bool = False) -> DataFrame:
        """``frame`` with the measurable checks guarded (or, after a guard stopped a write, counted)
        and the rows counted, unless the write reports them (``rows_reported``, then given to
        ``collect``) and nothing else is to be counted: an observation costs the write a few percent
        even for a row count alone. A check on a column whose staged type is unknown or differs from
        the query's is left to the audit."""
        from pyspark.sql import Observation, functions

        decided: list[Check] = []
        if self.checks:  # the schema is a round trip over Spark Connect
            written = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
            stored = {f.name: f.dataType.simpleString() for f in staged.fields} if staged is not None else {}
            decided = [c for c in self.checks if all(written.get(n) == stored.get(n, "") for n in c.columns())]
        self.guarded = [c for c in decided if self.guarding and violations(c)]
        self.observed = [c for c in decided if c not in self.guarded]
        counted = [expr for check in self.observed for expr in aggregates(check)]
        self.attached, self.observation, self.measured = True, None, None
        if self.guarded:
            frame = frame.withColumn(frame.columns[0], functions.expr(self._guard(frame.columns[0])))
        if rows_reported and not counted:
            return frame
        self.observation = Observation(NAME)
        # Not ``lit``: it imports pyspark.testing.utils, and with it pandas (over a second in a driver).
        columns = [functions.expr(expr).alias(f"a{i}") for i, expr in enumerate(["count(1)", *counted])]
        return frame.observe(self.observation, *columns)

    def _guard(self, column: str) -> str:
        """``column`` as it is, unless a guarded check's condition holds for the row: then the write
        fails. ``coalesce`` keeps the column's type and, where the column has no NULL, its
        nullability (a table may require it)."""
        raised = " ".join(
            f"WHEN {violations(check)} THEN raise_error('{GUARD}{i}')" for i, check in enumerate(self.guarded)
        )
        return f"coalesce(CASE {raised} END, {quote(column)})"

    def for_checks(self, frame: DataFrame, staged: Callable[[], StructType]) -> DataFrame:
        """``frame`` observed when there are checks to measure, else as it is (a write that needs no
        count of its own: the format's commit says how many rows it added)."""
        return self.attach(frame, staged()) if self.checks else frame

    def tripped(self, error: BaseException) -> Check | None:
        """The guarded check whose guard failed the write, if that is what ``error`` is."""
        found = _TRIPPED.search(str(error))
        index = int(found.group(1)) if found else -1
        return self.guarded[index] if 0 <= index < len(self.guarded) else None

    def write(self, write: Callable[[], R], log: Reporter, rewritable: Callable[[], bool]) -> R:
        """``write()`` (which attaches this observation); if a guard stopped it, the write again
        without guards, to count what fails (``rewritable``: the failed write left no rows behind)."""
        try:
            return write()
        except Exception as exc:
            check = self.tripped(exc)
            if check is None:
                raise
            log.warning(
                f"a row the query wrote fails check {check.name!r}, which stopped the write; "
                "writing again to count the offending rows of every check"
            )
            if not rewritable():
                raise AuditFailedError(
                    f"check {check.name!r} failed, nothing was published: a row fails it (the failed "
                    "write left rows in this try's staging, so it was not written again to count them)"
                ) from None
            self.guarding = False
            return write()

    def collect(self, log: Reporter, rows: int | None = None) -> Measured | None:
        """What the write measured, once it has ended (``rows``: what the write reported, when
        nothing observed them): a guarded check found no offending row; None if nothing was
        attached, or (logged) the rows are unknown."""
        if not self.attached:
            return None
        values: dict[str, Any] = {"a0": rows} if rows is not None else {}
        if self.observation is not None:
            try:
                values = self.observation.get
            except Exception as exc:  # noqa: BLE001 - a measurement; the audit's query is the fallback
                log.warning(f"could not read what the write observed ({first_line(exc)})")
                values = {}
        if "a0" not in values:
            log.info(
                "the write's rows were neither observed nor reported; what it would have measured is counted by a query"
            )
            self.measured = None
            return None
        counts: dict[str, list[int]] = {check.name: [0] for check in self.guarded}
        index = 1
        for check in self.observed:
            width = len(aggregates(check))
            counts[check.name] = [int(values[f"a{i}"] or 0) for i in range(index, index + width)]
            index += width
        self.measured = Measured(int(values["a0"]), counts)
        return self.measured
