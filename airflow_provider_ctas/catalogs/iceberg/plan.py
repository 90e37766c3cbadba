"""What an Iceberg try's begin decides, as data: how it publishes, what it stages on, and what its
prepare wrote. prepare and commit take these as input instead of reading them back from ``details``
(which is only the run's report)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from airflow_provider_ctas.catalogs.iceberg.adoption import KeptBranch
    from airflow_provider_ctas.catalogs.iceberg.reshape import Reshape


class Publish(StrEnum):
    RENAME = "rename"
    """A new target: an empty staging table is written, then renamed to the target."""
    BRANCH = "branch"
    """An existing target: this try's branch is written, then ``main`` moves to it in one metadata swap."""
    RESHAPE = "reshape"
    """A replace that changes the target's columns or partitioning: a staging table in the new shape is
    written, then the target's schema, spec and ``main`` change in one metadata swap (``reshape.py``)."""


@dataclass(frozen=True)
class IcebergPlan:
    mechanism: Publish
    schema: StructType
    base_snapshot: int | None = None
    """``main`` when this try's branch was made from it (a branch or reshape publish)."""
    partition_fields: Mapping[str, str] = field(default_factory=dict)
    """Each ``partition_by`` entry's field name in the target's partition struct (``ts_day``)."""
    reshape: Reshape | None = None
    """With ``Publish.RESHAPE``: the target's id counters at begin."""
    adopted: KeptBranch | None = None
    """With ``durable=True``: the earlier try's kept branch this try took over (``durable.py``)."""

    @property
    def in_staging_table(self) -> bool:
        """Whether prepare writes a staging table (not a branch of the target)."""
        return self.mechanism is not Publish.BRANCH

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.schema.fields]


@dataclass(frozen=True)
class Staged:
    """What prepare (or an adopted branch) left for commit: the snapshot holding this try's version."""

    snapshot_id: int
    row_count: int

    def wrote_nothing(self, plan: IcebergPlan) -> bool:
        """A partition overwrite of no rows commits no snapshot: the branch stays on its base."""
        return plan.mechanism is Publish.BRANCH and self.snapshot_id == plan.base_snapshot
