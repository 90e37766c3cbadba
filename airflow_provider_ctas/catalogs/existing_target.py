"""What a try does when its target already exists, read from the target's ownership markers.

Shared by the strategies that stage a new target under a reserved name and publish it by a rename
(Iceberg, Delta): at begin, and when the rename finds that the target appeared meanwhile. How long a
failed rename waits for that (``appeared``) is the session catalog's too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.details import Details
from airflow_provider_ctas.core.errors import FencedError, PublishError, TargetExistsError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import Outcome

if TYPE_CHECKING:
    from airflow_provider_ctas.catalogs.progress import Progress
    from airflow_provider_ctas.core.identifiers import TableRef
    from airflow_provider_ctas.spark.engine import Reporter


T = TypeVar("T")

APPEAR_SECONDS = 10.0
"""How long a failed rename waits for the target to appear before calling the failure its own."""


def appeared(read: Callable[[], T | None], wait_seconds: float = APPEAR_SECONDS, pause: float = 0.5) -> T | None:
    """``read()`` once it finds the target, or None after ``wait_seconds``. A concurrent creator's
    rename fails ours before its own metastore commit is visible: it has moved its directory to the
    target's location, or holds the row, and the metastore has not committed yet."""
    deadline = time.monotonic() + wait_seconds
    while (found := read()) is None and time.monotonic() < deadline:
        time.sleep(pause)
    return found


class ModalTable(Protocol):
    @property
    def target(self) -> TableRef: ...
    @property
    def txn_id(self) -> str: ...
    @property
    def mode(self) -> Mode: ...
    @property
    def last_committed_try(self) -> int | None: ...
    @property
    def try_number(self) -> int: ...


def nothing_to_do(
    table: ModalTable, props: Mapping[str, str], progress: Progress, details: Details, log: Reporter
) -> bool:
    """At begin, with the target's properties: whether this try is done before it starts (the
    outcome is set), must replace, or may not touch the target (raises)."""
    target, mode = table.target, table.mode
    if markers.owned_by(props, table.txn_id):
        published_try = markers.marker_try(props)
        details["published_by_try"] = published_try
        if not (mode in (Mode.REPLACE, Mode.OVERWRITE_PARTITIONS) and published_try == table.last_committed_try):
            log.info(f"{target} was already published by try {published_try} of this task instance")
            progress.outcome = Outcome.ALREADY_PUBLISHED
            return True
        log.info(f"{target} was published by try {published_try}, recorded successful: re-running")
        return False
    if mode is Mode.CREATE:
        raise TargetExistsError(
            f"{target} already exists; mode 'create' does not touch it (use 'replace' to replace it "
            "or 'create_if_not_exists' to skip)"
        )
    if mode is Mode.CREATE_IF_NOT_EXISTS:
        log.info(f"{target} exists; create_if_not_exists: nothing to do")
        progress.outcome = Outcome.TARGET_EXISTS
        return True
    return False


def after_lost_race(table: ModalTable, props: Mapping[str, str], progress: Progress, details: Details) -> None:
    """The rename found the target created meanwhile (``props`` are its properties): an earlier try
    of this transaction, a newer one (this try is superseded: a clear while it waited to publish),
    a create_if_not_exists that may skip, or another writer."""
    if markers.owned_by(props, table.txn_id):
        published_by = markers.marker_try(props)
        if published_by is not None and published_by > table.try_number:
            raise FencedError(
                f"try {published_by} of this task instance published {table.target} while try "
                f"{table.try_number} waited to publish; this try published nothing"
            )
        details["published_by_try"] = published_by
        progress.publish(Outcome.ALREADY_PUBLISHED)
    elif table.mode is Mode.CREATE_IF_NOT_EXISTS:
        progress.publish(Outcome.TARGET_EXISTS)
    elif table.mode is Mode.REPLACE:
        raise PublishError(
            f"{table.target} was created by another writer while this run was creating it; the next try replaces it"
        )
    else:
        raise TargetExistsError(
            f"{table.target} was created by another writer while this task ran; it is left untouched"
        )
