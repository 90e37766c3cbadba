"""A reporter (``spark.engine.Reporter``) that keeps what it was told, for tests that read a log."""

from __future__ import annotations


class RecordingReporter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        """Everything, in order."""
        self.warnings: list[str] = []
        """The warnings only."""

    def info(self, message: str) -> None:
        self.lines.append(message)

    def warning(self, message: str) -> None:
        self.lines.append(message)
        self.warnings.append(message)
