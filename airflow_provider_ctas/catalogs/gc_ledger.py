"""What every strategy's garbage collection shares: the rule that keeps running transactions and
young objects, and the report of what was removed or kept, and why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import validate_name

if TYPE_CHECKING:
    from airflow_provider_ctas.spark.engine import Reporter


@dataclass
class GcParams:
    databases: list[str]
    min_age_seconds: float
    dry_run: bool
    protect: set[str] = field(default_factory=set)
    """Transaction ids whose task instances Airflow reports as still active."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GcParams:
        databases = [validate_name(db, "database") for db in data.get("databases", [])]
        if not databases:
            raise InvalidInputError("garbage collection needs at least one database")
        min_age = data.get("min_age_seconds")
        if not isinstance(min_age, int | float) or min_age < 0:
            raise InvalidInputError("min_age_seconds must be a non-negative number")
        return cls(databases, float(min_age), bool(data.get("dry_run", True)), set(data.get("protect", [])))


class GcLedger:
    def __init__(self, params: GcParams, log: Reporter) -> None:
        self.dry_run, self.protect, self.log = params.dry_run, params.protect, log
        self.min_age = timedelta(seconds=params.min_age_seconds)
        self.now = datetime.now(UTC)
        self.entries: list[dict[str, Any]] = []

    def note(self, action: str, what: str, why: str, **extra: Any) -> None:
        if self.dry_run and action in ("removed", "restored"):
            action = f"would be {action}"
        self.entries.append({"action": action, "what": what, "why": why, **extra})
        self.log.info(f"gc: {action}: {what} ({why})")

    def owner_if_due(self, what: str, props: Mapping[str, str], owned: bool) -> tuple[str, dict[str, Any]] | None:
        """The (transaction id, task) of a reserved-name object whose markers say it is this
        provider's (``owned``) and that :meth:`blocked` does not keep; else noted as kept, None."""
        if not owned:
            self.note("kept", what, "reserved name without this provider's markers")
            return None
        txn_id, task = props[markers.TXN_ID], markers.task_of(props)
        return None if self.blocked(what, txn_id, props.get(markers.CREATED_AT), task) else (txn_id, task)

    def blocked(self, what: str, txn_id: str, created: str | None, task: dict[str, Any]) -> bool:
        """Protected transactions and young objects are kept; True when ``what`` must stay."""
        if txn_id in self.protect:
            self.note("kept", what, "its task instance is still active in Airflow", txn_id=txn_id, task=task)
            return True
        born = markers.parse_time(created)
        if born is None:
            self.note("kept", what, "no readable creation time", txn_id=txn_id, task=task)
            return True
        if self.now - born < self.min_age:
            self.note("kept", what, f"younger than min_age ({born.isoformat()})", txn_id=txn_id, task=task)
            return True
        return False

    def report(self) -> dict[str, Any]:
        summary: dict[str, int] = {}
        for entry in self.entries:
            summary[entry["action"]] = summary.get(entry["action"], 0) + 1
        return {"dry_run": self.dry_run, "summary": summary, "entries": self.entries}
