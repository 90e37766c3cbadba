"""The fences a try must hold to publish, as values (as pyiceberg's ``TableRequirement``s are).

Each requirement says what it asserts and is checked against what a strategy has just read of the
target or of its staging (an :class:`Observed`): before a publish, and, where the publish itself
cannot refuse a try that was fenced meanwhile, again right after it (the publish is then undone).
A requirement that does not hold is a ``FencedError`` naming the try that took over.

Delta's fence on a write into the target (the commit's ``txnAppId``/``txnVersion``) is checked by
Delta inside its commit, as a REST catalog checks ``AssertRefSnapshotId``; ``delta/run.py``
reports its refusal as a ``FencedError`` too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError


@dataclass(frozen=True)
class Observed:
    """What a strategy read of one table or staging, moments before the check."""

    properties: Mapping[str, str] | None = None
    """The table's properties; None when there is no such table."""
    marker: markers.MarkerFile | None = None
    """The marker of staging that is only a directory (no catalog entry); None when it has none."""
    fences: frozenset[int] = frozenset()
    """The tries of this transaction whose fence is raised on the table."""
    refs: frozenset[str] = frozenset()
    """The table's branches and tags (Iceberg)."""
    names: frozenset[str] = frozenset()
    """The transaction's staging names found beside the target: directories, or an Iceberg namespace's tables."""


class Requirement(ABC):
    @abstractmethod
    def problem(self, observed: Observed) -> str | None:
        """None when the requirement holds; otherwise why this try must not publish."""

    def holds(self, observed: Observed) -> bool:
        return self.problem(observed) is None

    def validate(self, observed: Observed) -> None:
        if (problem := self.problem(observed)) is not None:
            raise FencedError(problem)


@dataclass(frozen=True)
class AssertOwnStaging(Requirement):
    """The staging still carries this try's markers, not revoked: a newer try of the same task
    instance revokes it (drops the table, or marks a directory's marker) when it takes over."""

    txn_id: str
    try_number: int
    staging: str

    def problem(self, observed: Observed) -> str | None:
        marker, properties = observed.marker, observed.properties
        if marker is not None:
            ours = marker.txn_id == self.txn_id and marker.try_number == self.try_number and marker.revoked_by is None
        else:
            ours = (
                properties is not None
                and markers.owned_by(properties, self.txn_id)
                and markers.marker_try(properties) == self.try_number
            )
        if ours:
            return None
        return (
            f"the staging of try {self.try_number} ({self.staging}) is gone or revoked: a newer try of this "
            "task instance has taken over, so this try must not publish"
        )


@dataclass(frozen=True)
class AssertNoNewerStaging(Requirement):
    """No newer try of this transaction has created its staging table. A newer try's begin drops
    the staging an older try has; an older try that creates its staging only after that (it stalled
    inside its own begin, while its query was analysed) is fenced by this check instead, right
    before its publish."""

    txn_id: str
    try_number: int

    def problem(self, observed: Observed) -> str | None:
        newer = markers.newer_staging(observed.names, self.txn_id, self.try_number)
        if not newer:
            return None
        return (
            f"a newer try of this task instance has begun ({', '.join(newer)} exists); try {self.try_number} "
            "must not publish"
        )


@dataclass(frozen=True)
class AssertNotSuperseded(Requirement):
    """No newer try of this transaction has raised its fence on the target."""

    try_number: int

    def problem(self, observed: Observed) -> str | None:
        newest = max(observed.fences, default=0)
        if newest > self.try_number:
            return f"try {newest} of this task instance has begun; try {self.try_number} must not"
        return None


@dataclass(frozen=True)
class AssertNewestFence(Requirement):
    """This try's fence is the newest on the target and the branch it staged on is still there."""

    try_number: int
    target: str
    branch: str

    def problem(self, observed: Observed) -> str | None:
        fences = observed.fences
        if self.try_number in fences and max(fences) == self.try_number and self.branch in observed.refs:
            return None
        newer = max(fences, default=None)
        who = newer if newer and newer != self.try_number else "of another run"
        return f"try {who} of this task instance took over {self.target}; try {self.try_number} must not publish"
