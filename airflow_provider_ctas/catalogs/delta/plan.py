"""What a Delta try's begin decides, as data: how it publishes and what it writes first. prepare
and commit take it as input instead of reading it back from ``details`` (the run's report)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.core.comments import Comments
    from airflow_provider_ctas.core.durable import Candidate


class Publish(StrEnum):
    RENAME = "rename"
    """A new target: the staging table is written, then renamed to the target."""
    IN_PLACE = "delta_commit"
    """An existing target: one Delta commit of the new version, fenced by the transaction's
    application version (a write and its commit are one step in Delta)."""


@dataclass(frozen=True)
class DeltaPlan:
    mechanism: Publish
    schema: StructType
    comments: Comments
    """The published table's comments: the request's, over a replaced table's own (Delta's replace
    takes the comments its commit gives)."""
    stages: bool = True
    """Whether prepare writes a staging table: a new target, or an existing one with checks (what
    was checked is what is published) or with ``durable=True`` (what is kept for the next try)."""
    target_location: str | None = None
    """An existing target's location, where its log is read."""
    adopted: Candidate | None = None
    """With ``durable=True``: the prepared staging table of an earlier try that this try took over
    (``durable.py``); it keeps that try's name."""

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.schema.fields]

    def staging_created_in_begin(self, checks: bool) -> bool:
        """For a new target, as every format's create: a newer try's begin then finds this try's
        staging and drops it, which fences this try (the chaos soak, seed 864633392: created in
        prepare, it came after a newer try's begin and was published). With checks too, so that they
        are analysed before any data is written. An existing target's commits fence its tries."""
        return self.adopted is None and self.stages and (checks or self.mechanism is Publish.RENAME)
