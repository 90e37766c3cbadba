"""Built-in checks measured by the write itself: Spark's observed metrics ride on the query that
writes the staged version, so a row count, NULL counts, accepted values and value ranges cost no
second scan of what was just written.

Only what one aggregate over the written rows measures goes here. ``Unique`` needs a distinct
count (observed metrics refuse distinct aggregates); custom SQL and a ``result``-scope check of a
partition overwrite read other data: the audit phase runs those, as before. A check reads a column
here only where the query's type is the staged column's, so it counts the values stored, not ones
a cast on the way in could still change. Whatever the observation did not deliver the audit
measures with its own query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.catalogs.audit import Measured, aggregates
from airflow_provider_ctas.core.checks import Check
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.spark.engine import Reporter

NAME = "airflow_ctas_written"


def measurable(check: Check, partial: bool) -> bool:
    """Whether the written rows alone decide ``check`` (``partial``: the staged rows replace only
    some partitions of a published table, so a ``result``-scope check needs the rest too)."""
    return check.measured_in_write and (check.scope == "staged" or not partial)


class WriteObservation:
    """Attached to the frame a try writes; after the write, what it measured."""

    def __init__(self, checks: Sequence[Check], partial: bool) -> None:
        self.checks = [c for c in checks if measurable(c, partial)]
        self.observation: Any = None
        self.observed: list[Check] = []
        self.measured: Measured | None = None

    def attach(self, frame: DataFrame, staged: StructType | None) -> DataFrame:
        """``frame`` with the row count and the measurable checks' counts observed on it; a check
        on a column whose staged type is unknown or differs from the query's is left to the audit."""
        from pyspark.sql import Observation, functions

        written = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        stored = {f.name: f.dataType.simpleString() for f in staged.fields} if staged is not None else {}
        self.observed = [c for c in self.checks if all(written.get(n) == stored.get(n, "") for n in c.columns())]
        counted = ["count(1)"] + [expr for check in self.observed for expr in aggregates(check)]
        self.observation = Observation(NAME)
        self.measured = None
        # Not ``lit``: it imports pyspark.testing.utils, and with it pandas (over a second in a driver).
        columns = [functions.expr(expr).alias(f"a{i}") for i, expr in enumerate(counted)]
        return frame.observe(self.observation, *columns)

    def for_checks(self, frame: DataFrame, staged: Callable[[], StructType]) -> DataFrame:
        """``frame`` observed when there are checks to measure, else as it is (a write that needs no
        count of its own: the format's commit says how many rows it added)."""
        return self.attach(frame, staged()) if self.checks else frame

    def collect(self, log: Reporter) -> Measured | None:
        """What the write measured, once it has ended; None if nothing was observed, or (logged)
        the observation delivered nothing."""
        if self.observation is None:
            return None
        try:
            values = self.observation.get
        except Exception as exc:  # noqa: BLE001 - a measurement; the audit's query is the fallback
            log.warning(f"could not read what the write observed ({first_line(exc)})")
            values = {}
        if "a0" not in values:
            log.info("the write's observed metrics did not arrive; what they would have measured is counted by a query")
            self.measured = None
            return None
        counts: dict[str, list[int]] = {}
        index = 1
        for check in self.observed:
            width = len(aggregates(check))
            counts[check.name] = [int(values[f"a{i}"] or 0) for i in range(index, index + width)]
            index += width
        self.measured = Measured(int(values["a0"]), counts)
        return self.measured
