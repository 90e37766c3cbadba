"""What a run reports in its transaction's ``details`` (the XCom), as one typed structure.

Every key the driver and the operator write is declared here with its type and meaning; mypy
refuses a key that is not, and the reference table in ``docs/reference/xcom.md`` is generated from
this class. ``details`` is a report: no phase reads back what another wrote there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypedDict, cast, get_type_hints


class Details(TypedDict, total=False):
    """Each key: ``Annotated[type, what the reference calls its type, its meaning]``."""

    row_count: Annotated[int, "int", "rows the published version's write produced"]
    files: Annotated[int, "int", "files the write produced (file formats)"]
    bytes: Annotated[int, "int", "bytes the write produced (file formats)"]
    spark_jobs: Annotated[int, "int", "the Spark jobs the driver ran (not over Spark Connect)"]
    published_by_try: Annotated[int | None, "int", "the try that published"]
    columns: Annotated[list[str], "list of str", "the new version's columns"]
    schema: Annotated[list[dict[str, str]], 'list of `{"name", "type"}`', "the new version's schema"]
    publish_mechanism: Annotated[
        str, "str", "file formats: `rename`, `flip`, `swap`, `partitions`; Iceberg: `rename`, `branch`; Delta: "
        "`rename`, `delta_commit`"
    ]  # fmt: skip
    publish: Annotated[
        dict[str, Any], "object", 'file formats: `{"mechanism", "seconds"}`, plus `previous_location` and '
        "`location` for a flip, `unavailable_seconds` for a swap, `partitions` (sorted list of `col=value` paths) "
        "for `overwrite_partitions`, its first run included; Iceberg and Delta: `{\"mechanism\"}`, plus the "
        "snapshot id of a branch publish or the Delta version of a commit; a publish group: `{\"mechanism\", "
        "\"members\"}`"
    ]  # fmt: skip
    staging_table: Annotated[
        str, "str", "the staging table (none for a flip or a partition switch, whose staging is only its directory)"
    ]
    staging_location: Annotated[str, "str", "where staging was written"]
    location: Annotated[str, "str", "where the table reads"]
    snapshot_id: Annotated[int, "int", "Iceberg: the snapshot holding this try's version (on its branch)"]
    base_snapshot_id: Annotated[int, "int", "Iceberg: `main`'s snapshot when this try's branch was made from it"]
    delta_version: Annotated[int, "int", "Delta: the table version of this try's last commit"]
    spark_application: Annotated[
        dict[str, Any], "object", '`{"id", "ui", "master", "version"}` (`version`: the Spark release that ran), plus '
        "`history`, the application's page on the Spark History Server, when the driver has "
        "`spark.yarn.historyServer.address` and event logs on"
    ]  # fmt: skip
    metastore_uris: Annotated[str, "str", "what the driver's catalog client used"]
    prepared_at: Annotated[
        str, "str, UTC", "when the write finished in the driver; the history's `prepared` entry carries this time"
    ]
    finalized_at: Annotated[str, "str, UTC", "when the task confirmed the publish after Airflow recorded success"]
    prepared_record: Annotated[
        str, "str", "with `durable=True`: where the driver recorded its prepared staging for the next try, before "
        "it asked for the decision"
    ]  # fmt: skip
    adopted_from_try: Annotated[
        int, "int", "with `durable=True`: the earlier try whose prepared staging this try took over and published "
        "without running the query ([Durable tries](../concepts/durable-tries.md))"
    ]  # fmt: skip
    held: Annotated[
        dict[str, Any], "object", 'a publish group\'s member: `{"branch", "snapshot_id", "base_snapshot_id", '
        '"checks"}`, what it staged and holds for the group\'s publisher; its transaction stays `prepared` '
        "([Publish groups](../concepts/publish-groups.md))"
    ]  # fmt: skip
    members: Annotated[
        dict[str, dict[str, Any]], "object", 'a publish group\'s publisher: per member table, `{"outcome", '
        '"snapshot_id", "row_count", "txn_id", "try_number"}`'
    ]  # fmt: skip
    inputs: Annotated[
        list[Any], "list", "what the analysed query reads: `database.table` in the target's metastore, or "
        '`{"namespace", "name"}` for another catalog\'s table, files read by path and JDBC sources (not over Spark '
        "Connect)"
    ]  # fmt: skip
    column_lineage: Annotated[
        dict[str, Any], "object", "per output column, `[input index, input column, subtype]` for each input "
        "column its values come from (the index into `inputs`; subtype `IDENTITY`, `TRANSFORMATION` or "
        "`AGGREGATION`); not over Spark Connect ([Lineage](../concepts/lineage.md))"
    ]  # fmt: skip
    superseded_kept: Annotated[
        list[str], "list of str", "previous versions left in place because this provider did not create them"
    ]
    finalize_pending: Annotated[list[str], "list of str", "steps after a publish that failed without undoing it"]
    unconfirmed_calls: Annotated[
        list[str], "list of str", "publishing metastore calls whose answer was lost, found applied when read again"
    ]
    phases: Annotated[
        list[dict[str, Any]], "list of objects", "the driver's per-phase reports: `phase`, `status`, `seconds`, "
        "`touched`, `note`"
    ]  # fmt: skip
    checks: Annotated[
        list[dict[str, Any]], "list of objects", "the audit's results: `name`, `type`, `scope`, `passed`, `value`, "
        "`expected`, `note`, `sample` ([Audit before publish](../concepts/checks.md))"
    ]  # fmt: skip
    aborted_by: Annotated[str, "str", "`spark driver` (it cleaned up after a failure) or `abort run`"]
    result: Annotated[
        str, "str", "`exit status only`: a cluster-mode driver's result could not be read back; its exit status "
        "decided the try"
    ]  # fmt: skip
    error: Annotated[
        dict[str, Any], "object", '`{"code", "message", "phase"}`, built in one place: `core.protocol.error_info`'
    ]


def received(data: Mapping[str, Any]) -> Details:
    """``details`` as a driver's result or stored state carries them: written through this type on
    the side that wrote them (a key an older provider wrote passes through; it is a report)."""
    return cast(Details, dict(data))


def reference() -> list[tuple[str, str, str]]:
    """Each key of :class:`Details` with its type's name and meaning, in declaration order."""
    hints = get_type_hints(Details, include_extras=True)
    return [(key, *hint.__metadata__) for key, hint in hints.items()]
