"""An ``overwrite_partitions`` try whose target's ``main`` moved after it began: another task
instance (a backfill's other dates) published first. Its staged partitions are re-applied on the
current ``main``, without rewriting any data.

The try staged its partitions as one snapshot on its own branch, a child of the ``main`` it began
from. Fast-forwarding ``main`` to it now would drop what the others published. Instead the branch
is reset to the current ``main`` (one metadata swap, only while the fence names this try and the
branch still holds its staged snapshot), and the staged snapshot's data files are committed on the
branch as a ``ReplacePartitions`` validated from the snapshot the try began from: if another writer
added or deleted data in the same partitions meanwhile, Iceberg refuses it and nothing is
published (the next try starts from the new version). The branch's head is then a child of the
current ``main``, ready for the usual fenced fast-forward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from airflow_provider_ctas.catalogs.iceberg import metadata as md
from airflow_provider_ctas.catalogs.iceberg.metadata import IcebergCatalog
from airflow_provider_ctas.core.errors import FencedError, PublishError
from airflow_provider_ctas.spark.errors import first_line

REBASED_FROM = "airflow_ctas.rebased_from_snapshot"
"""In the rebased snapshot's summary: the snapshot the try staged."""


def _java_iter(iterable: Any) -> Iterator[Any]:
    it = iterable.iterator()
    while it.hasNext():
        yield it.next()


def added_files(table: Any, snapshot_id: int) -> list[Any]:
    snapshot = table.operations().refresh().snapshot(snapshot_id)
    return list(_java_iter(snapshot.addedDataFiles(table.io())))


def partition_names(table: Any, snapshot_id: int) -> list[str]:
    """The partitions a snapshot added files to, as ``col=value`` paths (what assets call partition keys)."""
    specs = table.specs()
    return sorted({str(specs.get(f.specId()).partitionToPath(f.partition())) for f in added_files(table, snapshot_id)})


def rebase(
    catalog: IcebergCatalog,
    table: Any,
    *,
    branch: str,
    staged: int,
    began_from: int,
    still_ours: Callable[[Any], None],
    summary: Mapping[str, str],
) -> int:
    """Re-applies snapshot ``staged`` on the current ``main`` as the new head of ``branch``; returns it.

    ``still_ours(base)`` raises when the try may no longer touch the branch (its fence moved)."""
    files = added_files(table, staged)

    def reset(base: Any, builder: Any) -> Any:
        still_ours(base)
        if md.refs(base).get(branch) != staged:
            raise FencedError(f"branch {branch} no longer holds this try's snapshot {staged}; not publishing")
        main = md.main_snapshot(base)
        if main is None:
            raise PublishError(f"{table.name()}'s main branch is gone; nothing was published")
        return builder.setRef(branch, catalog.branch_ref(main))

    catalog.commit(table, reset)
    replace = table.newReplacePartitions()
    for data_file in files:
        replace = replace.addFile(data_file)
    replace = replace.toBranch(branch).validateFromSnapshot(began_from)
    replace = replace.validateNoConflictingData().validateNoConflictingDeletes()
    for key, value in {**summary, REBASED_FROM: str(staged)}.items():
        replace = replace.set(key, value)
    try:
        replace.commit()
    except Exception as exc:
        if md.java_class(exc).endswith("ValidationException"):
            raise PublishError(
                f"another writer changed the partitions this try overwrites since it began: {first_line(exc)}; "
                "nothing was published, the next try starts from the new version"
            ) from exc
        raise
    head = md.refs(table.operations().refresh()).get(branch)
    if head is None:
        raise FencedError(f"branch {branch} was removed while this try re-applied its partitions")
    return head
