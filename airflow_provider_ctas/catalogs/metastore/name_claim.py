"""A claim on a table's name for the length of one rename into it.

The Hive metastore renames a managed table by moving its directory to the new name's location and
then committing. A rename that fails at its commit moves "its" directory back; when two renames
into one name ran at once, the directory it moves back is the winner's, and the published table is
left without its data (``HiveAlterHandler.alterTable``, Hive 2.3 to 4; measured here: 3 of 30 pairs
of concurrent renames into one name through one metastore service). So creators of one target (a
backfill's first dates, two task instances, two tries) rename into it one at a time: each first
creates a view under a name derived from the target, which the metastore creates once, renames, and
drops the view.

A claim outlives its holder only when the holder was killed inside it. The next try of the same
task instance takes such a claim over at once; anyone else waits for it, and takes it over once it
is older than ``CLAIM_STALE_SECONDS``; garbage collection removes it too. Spark's embedded Derby
metastore, which one process holds at a time, needs no claim.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import LeftoverError, PublishError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.errors import first_line

if TYPE_CHECKING:
    from airflow_provider_ctas.spark.engine import Reporter

CLAIM_WAIT_SECONDS = 60.0
"""How long a rename waits for another's claim on the name (a rename takes a second or two)."""
CLAIM_STALE_SECONDS = 900.0
"""A claim this old was left by a killed holder: longer than a metastore call can run (Spark's
client gives up on one after 600 s)."""
_CLAIM_KEYS = (markers.TXN_ID, markers.TRY_NUMBER, markers.TARGET, markers.DAG_ID, markers.TASK_ID,
               markers.RUN_ID, markers.MAP_INDEX, markers.CREATED_AT)  # fmt: skip


class NameCatalog(Protocol):
    """What a claim needs of the catalog (``CatalogClient``)."""

    def shared(self) -> bool: ...
    def create_view(self, ref: TableRef, comment: str, properties: Mapping[str, str]) -> None: ...
    def properties(self, ref: TableRef) -> dict[str, str] | None: ...
    def drop_view(self, ref: TableRef) -> None: ...


def claim_of(target: TableRef) -> TableRef:
    return TableRef(target.database, markers.claim_name(target.qualified), target.catalog)


@contextmanager
def name_claimed(
    catalog: NameCatalog,
    target: TableRef,
    owner: Mapping[str, str],
    log: Reporter,
    wait_seconds: float = CLAIM_WAIT_SECONDS,
) -> Iterator[None]:
    """Hold the claim on ``target``'s name while the body renames into it. ``owner``: this try's
    markers (the claim carries them, for whoever finds it). A metastore no other process shares
    (Spark's embedded Derby) has nobody to take turns with: no claim."""
    if not catalog.shared():
        yield
        return
    claim = claim_of(target)
    mine = {key: owner[key] for key in _CLAIM_KEYS if key in owner}
    _take(catalog, claim, target, mine, log, wait_seconds)
    try:
        yield
    finally:
        _release(catalog, claim, target, mine, log)


def _take(
    catalog: NameCatalog, claim: TableRef, target: TableRef, mine: dict[str, str], log: Reporter, wait_seconds: float
) -> None:
    deadline = time.monotonic() + wait_seconds
    waiting_for: str | None = None
    while True:
        try:
            catalog.create_view(claim, f"airflow-provider-ctas: {target} is being renamed into", mine)
            if waiting_for:
                log.info(f"claimed {target}'s name after {waiting_for} released it")
            return
        except Exception as exc:  # noqa: BLE001 - decided from the claim the catalog shows
            failure = exc
        held = catalog.properties(claim)
        if held is not None and not markers.is_claim(held, claim.table):
            raise LeftoverError(
                f"{claim} holds the name this provider claims to rename into {target}, but it has no markers of "
                "this provider; it is left alone: remove it, then retry"
            ) from failure
        holder = _holder(held) if held is not None else None
        if held is not None and _taken_over(held, mine):
            if catalog.properties(claim) == held:
                catalog.drop_view(claim)
            since = held.get(markers.CREATED_AT)
            log.warning(f"took over {claim}, the claim on {target}'s name of {holder} since {since}")
            continue
        if time.monotonic() > deadline:
            if held is None:
                raise PublishError(f"could not claim {target}'s name ({claim}): {first_line(failure)}") from failure
            raise PublishError(
                f"{target}'s name is claimed by {holder} since {held.get(markers.CREATED_AT)}, renaming into it; "
                f"gave up after {wait_seconds:.0f}s, the next try looks again"
            ) from failure
        if holder and holder != waiting_for:
            log.info(f"waiting for {holder}'s rename into {target} ({claim})")
            waiting_for = holder
        time.sleep(0.5)


def _taken_over(held: Mapping[str, str], mine: Mapping[str, str]) -> bool:
    """An earlier try of this task instance was killed inside its claim (its staging is gone or
    taken over, and the checks right before a rename fence it), or any holder's claim is stale."""
    if held.get(markers.TXN_ID) == mine.get(markers.TXN_ID) and _try(held) < _try(mine):
        return True
    born = markers.parse_time(held.get(markers.CREATED_AT))
    return born is not None and (datetime.now(UTC) - born).total_seconds() > CLAIM_STALE_SECONDS


def _release(catalog: NameCatalog, claim: TableRef, target: TableRef, mine: dict[str, str], log: Reporter) -> None:
    """Drop the claim if it is still this try's (one taken over as stale belongs to its taker)."""
    try:
        held = catalog.properties(claim)
        if held is not None and all(held.get(key) == value for key, value in mine.items()):
            catalog.drop_view(claim)
    except Exception as exc:  # noqa: BLE001 - the rename's outcome stands; the next creator takes it over
        log.warning(
            f"could not remove {claim}, this try's claim on {target}'s name: {first_line(exc)}; the next try "
            "takes it over, garbage collection removes it"
        )


def _holder(held: Mapping[str, str]) -> str:
    task = ".".join(v for v in (held.get(markers.DAG_ID), held.get(markers.TASK_ID)) if v)
    return f"transaction {held.get(markers.TXN_ID)} ({task or 'unknown task'}, try {_try(held)})"


def _try(properties: Mapping[str, str]) -> int:
    try:
        return int(properties.get(markers.TRY_NUMBER, "0"))
    except ValueError:
        return 0
