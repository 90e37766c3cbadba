"""The chaos soak's fault schedules, drawn from a seed (pure logic: no Spark, no Airflow).

A soak of N runs draws one seed per run from its own seed; a run's seed alone decides everything
about the run (its mode, durability, which tries fail and how), so ``scripts/soak.sh --replay SEED``
runs exactly that run again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MODES = ("create", "replace", "swap", "overwrite_partitions")
FORMATS = ("parquet", "iceberg", "delta", "iceberg-rest")
"""parquet: a file-format table in Spark's session catalog; iceberg: an Iceberg table in a
Hive-metastore catalog; delta: a Delta table in Delta's session catalog (both on the same metastore
service); iceberg-rest: an Iceberg table in a REST catalog (the Iceberg project's own server). The
Iceberg and Delta drivers run on Spark 4.1."""
TABLE_FORMATS = {"parquet": "parquet", "iceberg": "iceberg", "delta": "delta", "iceberg-rest": "iceberg"}
"""The operator's ``table_format`` for each of the soak's tables."""
FORMAT_MODES = ("create", "replace", "overwrite_partitions")
"""Iceberg and Delta: a replace publishes in one commit of the format whatever the shape (no swap)."""

# Where a fault can land: the driver's injection points (airflow_provider_ctas/core/faults.py, each
# reached in every run of its mode and format), the task's point while its driver waits for the
# decision, and the middle of the write.
DRIVER_POINTS = ("after_begin", "after_prepare", "before_publish", "after_publish")
MODE_POINTS: dict[str, tuple[str, ...]] = {
    "swap": ("publish_after_move_aside",),
    # After the last ownership check, right before the flip or the partition switch: README's fencing limit.
    "replace": ("publish_checked",),
    "overwrite_partitions": ("publish_checked",),
}
# Iceberg, on either catalog: after the fence's check, right before the commit that carries it as a requirement.
ICEBERG_POINTS: dict[str, tuple[str, ...]] = {
    "replace": ("publish_checked",),
    "overwrite_partitions": ("publish_checked",),
}
FORMAT_MODE_POINTS: dict[str, dict[str, tuple[str, ...]]] = {
    "parquet": MODE_POINTS,
    "iceberg": ICEBERG_POINTS,
    "iceberg-rest": ICEBERG_POINTS,
    "delta": {},
}
TASK_POINT = "before_decision"
MID_WRITE = "mid-write"

KINDS = ("kill-task", "term-task", "kill-driver", "raise", "query-fails", "metastore-restart", "timeout", "clear")
"""kill-task: SIGKILL the try's whole process group (task and supervisor: the worker lost);
term-task: SIGTERM it (on_kill, as a 'mark failed' sends); kill-driver: SIGKILL its Spark driver;
raise: an exception inside the driver at the point; query-fails: the query itself fails at run
time; metastore-restart: the table's catalog service (the metastore service; for iceberg-rest, the
REST catalog server) stopped at the point, started 1-6 s later;
timeout: the try outlives the task's ``execution_timeout`` while it is held at the point; clear:
while the try is held at the point, the task instance is cleared and its next try starts beside it
(the held try is then a zombie that must not publish); the run ends with that next try."""

STORAGES = ("local", "s3")
"""Where a file-format soak's tables live: the local disk, or a bucket of the dev stack's S3 server
that the drivers reach through a fault proxy (``scripts/soak.sh --storage s3``)."""
S3_KINDS = ("s3-down", "s3-unreachable")
"""Drawn when the tables are on S3 as well, each for a while from the point on, then the store
recovers: s3-down: it answers every request of the drivers ``503`` (as a store that is down does);
s3-unreachable: their open connections are reset and new ones refused (as when the store's server
is killed and restarted; its objects are kept, as a real endpoint's are)."""

CLEAR_POINTS = ("after_begin", "after_prepare", "before_publish")
"""Where a cleared try is held while its next try runs: before it published."""
STALLED_BEGIN = "before_staging"
"""Inside a try's begin, before it has staging: a newer try's begin has nothing of it to drop or
revoke, and its publish must find the newer try's staging (README's Limits)."""
AFTER_COMMIT_POINTS = frozenset({"after_publish"})
"""Points past the publish: a try that dies there has published (README's after-commit window)."""


@dataclass(frozen=True)
class Fault:
    kind: str
    point: str

    def __str__(self) -> str:
        return f"{self.kind}@{self.point}" if self.point else self.kind


def clear_points(table_format: str, mode: str) -> tuple[str, ...]:
    """Where a cleared try can be held. ``STALLED_BEGIN`` where every begin of the mode creates its
    staging there (for Iceberg and Delta only a ``create``: a write into an existing table stages
    elsewhere), last, so that the points drawn before it was added stay drawn by the same seeds."""
    stalled = (STALLED_BEGIN,) if table_format == "parquet" or mode == "create" else ()
    return (*CLEAR_POINTS, *mode_points(table_format, mode), *stalled)


def mode_points(table_format: str, mode: str) -> tuple[str, ...]:
    """The points of a mode's publish where a fault can land, for a table of ``table_format``."""
    return FORMAT_MODE_POINTS[table_format].get(mode, ())


@dataclass(frozen=True)
class Schedule:
    seed: int
    mode: str
    durable: bool
    faults: tuple[Fault, ...]
    """One per faulted try, in order; the try after the last one runs without a fault."""
    table_format: str = "parquet"
    storage: str = "local"

    @property
    def slow(self) -> bool:
        """A fault lands mid-write: every try's query is slow enough to be interrupted (the same
        query text in every try, so that a durable try stays adoptable)."""
        return any(f.point == MID_WRITE for f in self.faults)

    def __str__(self) -> str:
        faults = ", ".join(f"try {i}: {f}" for i, f in enumerate(self.faults, 1)) or "none"
        table = "" if self.table_format == "parquet" else f"{self.table_format} "
        table += "" if self.storage == "local" else f"on {self.storage} "
        return f"seed {self.seed}: {table}{self.mode}{' durable' if self.durable else ''}; {faults}"


def run_seeds(seed: int, runs: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1, 2**31) for _ in range(runs)]


def _fault(rng: random.Random, mode: str, table_format: str, kinds: tuple[str, ...]) -> Fault:
    kind = rng.choice(kinds)
    driver_points = DRIVER_POINTS + mode_points(table_format, mode)
    if kind == "query-fails":
        return Fault(kind, "")
    if kind == "raise":
        return Fault(kind, rng.choice(driver_points))
    if kind == "metastore-restart":
        return Fault(kind, rng.choice(("after_prepare", "before_publish")))
    if kind in ("kill-driver", *S3_KINDS):
        return Fault(kind, rng.choice((*driver_points, MID_WRITE)))
    if kind == "timeout":
        return Fault(kind, rng.choice((*driver_points, TASK_POINT)))
    if kind == "clear":
        return Fault(kind, rng.choice(clear_points(table_format, mode)))
    return Fault(kind, rng.choice((*driver_points, TASK_POINT, MID_WRITE)))


def schedule_for(seed: int, formats: tuple[str, ...] = ("parquet",), storage: str = "local") -> Schedule:
    """The run ``seed`` decides among tables of ``formats`` on ``storage``. The format is drawn apart
    from the rest, so a seed's file-format run is the same whichever formats a soak also covers."""
    if storage not in STORAGES:
        raise ValueError(f"soak storage is one of {', '.join(STORAGES)}, not {storage!r}")
    if storage == "s3" and formats != ("parquet",):
        raise ValueError("a soak on S3 runs file-format tables only (--formats parquet)")
    kinds = KINDS + S3_KINDS if storage == "s3" else KINDS
    table_format = random.Random(f"format:{seed}").choice(formats) if len(formats) > 1 else formats[0]
    rng = random.Random(seed)
    mode = rng.choice(MODES if table_format == "parquet" else FORMAT_MODES)
    durable = rng.random() < 0.5
    faulted = rng.choices((0, 1, 2), weights=(1, 6, 3))[0]
    faults: list[Fault] = []
    for _ in range(faulted):
        faults.append(_fault(rng, mode, table_format, kinds))
        if faults[-1].kind == "clear":  # its next try runs beside it, without a fault: the last one
            break
    return Schedule(seed, mode, durable, tuple(faults), table_format, storage)


def formats_from(text: str) -> tuple[str, ...]:
    """``CTAS_SOAK_FORMATS`` (comma-separated) as a tuple, refusing a format the soak does not know."""
    formats = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"soak formats are some of {', '.join(FORMATS)}, not {text!r}")
    return formats
