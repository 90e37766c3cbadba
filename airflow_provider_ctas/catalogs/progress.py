"""How far one driver-side run got, shared by every strategy's executor."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_ctas.core.protocol import Reached
from airflow_provider_ctas.core.transaction import Outcome


@dataclass
class Progress:
    """How far this run got. ``published`` turns true the moment the target changed, even if a
    later step fails: from then on the run must never abort."""

    reached: Reached = Reached.NEW
    published: bool = False
    outcome: Outcome | None = None

    def publish(self, outcome: Outcome = Outcome.PUBLISHED) -> None:
        self.published = outcome is Outcome.PUBLISHED
        self.outcome = outcome


class ReportsProgress:
    """What an executor tells the driver about its run, read from its ``progress``."""

    progress: Progress

    @property
    def published(self) -> bool:
        return self.progress.published

    @property
    def reached(self) -> Reached:
        return self.progress.reached

    @property
    def outcome(self) -> str | None:
        return self.progress.outcome.value if self.progress.outcome else None
