"""What the Airflow side sends to the Spark application and what it gets back.

The request travels as a JSON file (shipped with ``--files``), never on a command line: real
queries exceed argument-length limits and must not pass through any shell. The result comes back
as a JSON file when the driver shares a filesystem with the worker (local and client mode); in
cluster mode only the exit status is known and the operator says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

from airflow_provider_ctas.core.errors import CorruptStateError

PROTOCOL_VERSION = 4
Phase = Literal["begin", "prepare", "audit", "hold", "commit", "abort", "gc"]
RUN_PHASES: tuple[Phase, ...] = ("begin", "prepare", "commit")
AUDITED_RUN_PHASES: tuple[Phase, ...] = ("begin", "prepare", "audit", "commit")
"""A run with checks: they are evaluated on the staged version before the commit decision."""
HELD_RUN_PHASES: tuple[Phase, ...] = ("begin", "prepare", "hold")
AUDITED_HELD_RUN_PHASES: tuple[Phase, ...] = ("begin", "prepare", "audit", "hold")
"""A publish group's member: it stages, is audited, and holds its staging for the group's publisher."""
GROUP_COMMIT_PHASES: tuple[Phase, ...] = ("commit",)
"""A publish group's publisher: the members' held staging, published in one catalog commit."""
ABORT_PHASES: tuple[Phase, ...] = ("abort",)
GC_PHASES: tuple[Phase, ...] = ("gc",)
_ALLOWED_PHASE_LISTS = {
    RUN_PHASES,
    AUDITED_RUN_PHASES,
    HELD_RUN_PHASES,
    AUDITED_HELD_RUN_PHASES,
    GROUP_COMMIT_PHASES,
    ABORT_PHASES,
    GC_PHASES,
}
GROUP_KIND = "iceberg_group"
"""The only table kind whose request may be the commit phase alone."""


def run_phases_for(checks: list[dict[str, Any]], *, hold: bool = False) -> tuple[Phase, ...]:
    if hold:
        return AUDITED_HELD_RUN_PHASES if checks else HELD_RUN_PHASES
    return AUDITED_RUN_PHASES if checks else RUN_PHASES


RESULT_LINE_PREFIX = "AIRFLOW_CTAS_RESULT "


class Reached(StrEnum):
    """The last transaction state a driver-side run reached (``PhaseResult.reached``)."""

    NEW = "new"
    BEGUN = "begun"
    PREPARED = "prepared"
    COMMITTED = "committed"
    ABORTED = "aborted"
    GC = "gc"
    UNKNOWN = "unknown"
    """Only the exit status is known (cluster mode: the driver could not write the result file here)."""


@dataclass(frozen=True)
class PhaseRequest:
    phases: tuple[Phase, ...]
    table: dict[str, Any]
    sql: str | None = None
    result_path: str | None = None
    faults: dict[str, Any] = field(default_factory=dict)
    """Fault injection for this provider's own tests (``AIRFLOW_CTAS_FAULTS``); empty in production."""
    gc: dict[str, Any] | None = None
    """Garbage-collection settings, for the ``gc`` phase (which has no transaction)."""
    coordinator: dict[str, Any] | None = None
    """Where the driver asks the task for the commit decision (``runners/coordinator.py``); with commit only."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    """Audit checks (``core.checks``, dict form), evaluated by the audit phase; only with it."""
    durable: str | None = None
    """With ``durable=True``: the digest of what this try computes (``core.durable``); a prepared
    staging is then kept for the next try when the task is lost, and adopted from an earlier try."""

    def to_json(self) -> str:
        return json.dumps({"protocol": PROTOCOL_VERSION, **asdict(self), "phases": list(self.phases)})

    @classmethod
    def from_json(cls, text: str) -> PhaseRequest:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CorruptStateError(f"request is not JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("protocol") != PROTOCOL_VERSION:
            raise CorruptStateError(f"request protocol must be {PROTOCOL_VERSION}")
        expected = {"protocol", "phases", "table", "sql", "result_path", "faults", "gc", "coordinator", "checks"}
        expected.add("durable")
        if set(data) != expected:
            raise CorruptStateError(f"request fields {sorted(data)} != {sorted(expected)}")
        phases = tuple(data["phases"]) if isinstance(data["phases"], list) else ()
        if phases not in _ALLOWED_PHASE_LISTS:
            raise CorruptStateError(f"request phases {data['phases']!r} are not a known phase list")
        if "prepare" in phases and not isinstance(data["sql"], str):
            raise CorruptStateError("request for prepare carries no SQL")
        if not isinstance(data["table"], dict) or not isinstance(data["faults"], dict):
            raise CorruptStateError("request table and faults must be objects")
        _check_group_phases(phases, data["table"])
        if (phases == GC_PHASES) != isinstance(data["gc"], dict):
            raise CorruptStateError("gc settings go with the gc phase, and only with it")
        if not isinstance(data["checks"], list) or bool(data["checks"]) != ("audit" in phases):
            raise CorruptStateError("request checks are a list, non-empty exactly when the audit phase runs")
        if data["coordinator"] is not None and ("commit" not in phases or not isinstance(data["coordinator"], dict)):
            raise CorruptStateError("coordinator settings are an object, and go with the commit phase only")
        return cls(
            phases=phases,
            table=data["table"],
            sql=data["sql"],
            result_path=data["result_path"],
            faults=data["faults"],
            gc=data["gc"],
            coordinator=data["coordinator"],
            checks=data["checks"],
            durable=_durable(data["durable"], phases),
        )


def _check_group_phases(phases: tuple[str, ...], table: Mapping[str, Any]) -> None:
    if (phases == GROUP_COMMIT_PHASES) != (table.get("kind") == GROUP_KIND) and phases != ABORT_PHASES:
        raise CorruptStateError("the commit phase alone is a publish group's, and a group runs only that or abort")


def _durable(value: object, phases: tuple[str, ...]) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) != 64 or "commit" not in phases):
        raise CorruptStateError("durable is a digest, and goes with the commit phase only")
    return value


@dataclass
class PhaseReport:
    phase: str
    status: Literal["ok", "failed", "skipped"]
    seconds: float
    touched: list[str] = field(default_factory=list)
    note: str = ""


def error_info(code: str, message: str, phase: str) -> dict[str, str]:
    """``PhaseResult.error``: a provider error code (``core.errors``), a message and where it happened."""
    return {"code": code, "message": message[-4000:], "phase": phase}


@dataclass
class PhaseResult:
    """Outcome of one Spark application run: how far it got, what it touched, why it stopped."""

    ok: bool = False
    reached: Reached = Reached.NEW
    """The last transaction state this run reached."""
    outcome: str | None = None
    cleaned_up: bool = False
    """After a failure, this try's staging was removed inside the driver; no abort run is needed."""
    details: dict[str, Any] = field(default_factory=dict)
    """A run's ``Details`` (``core/details.py``, typed where the executors write them), or GC's report."""
    phases: list[PhaseReport] = field(default_factory=list)
    error: dict[str, str] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> PhaseResult:
        """Strict: the driver runs this same package (shipped with ``--py-files``), so any other
        shape is a corrupt or foreign result, refused rather than half-read."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CorruptStateError(f"result is not JSON: {exc}") from exc
        expected = {"ok", "reached", "outcome", "cleaned_up", "details", "phases", "error"}
        if not isinstance(data, Mapping) or set(data) != expected:
            raise CorruptStateError(f"result fields must be {sorted(expected)}")
        if not isinstance(data["ok"], bool) or not isinstance(data["cleaned_up"], bool):
            raise CorruptStateError("result ok and cleaned_up must be booleans")
        if data["reached"] not in Reached._value2member_map_:
            raise CorruptStateError(f"result reached {data['reached']!r} is not a transaction state")
        if data["outcome"] is not None and not isinstance(data["outcome"], str):
            raise CorruptStateError("result outcome must be a string or null")
        if not isinstance(data["details"], dict) or not isinstance(data["phases"], list):
            raise CorruptStateError("result details must be an object and phases a list")
        error = data["error"]
        if error is not None and (
            not isinstance(error, dict)
            or set(error) != {"code", "message", "phase"}
            or not all(isinstance(v, str) for v in error.values())
        ):
            raise CorruptStateError("result error must be {code, message, phase} strings or null")
        return cls(
            ok=data["ok"],
            reached=Reached(data["reached"]),
            outcome=data["outcome"],
            cleaned_up=data["cleaned_up"],
            details=data["details"],
            phases=[_report(report) for report in data["phases"]],
            error=error,
        )


def _report(data: object) -> PhaseReport:
    fields = {"phase", "status", "seconds", "touched", "note"}
    if not isinstance(data, dict) or set(data) != fields or data["status"] not in ("ok", "failed", "skipped"):
        raise CorruptStateError(f"result phase report is malformed: {data!r}"[:300])
    if not isinstance(data["seconds"], int | float) or not isinstance(data["touched"], list):
        raise CorruptStateError("result phase report seconds must be a number and touched a list")
    return PhaseReport(
        str(data["phase"]), data["status"], float(data["seconds"]), [str(t) for t in data["touched"]], str(data["note"])
    )
