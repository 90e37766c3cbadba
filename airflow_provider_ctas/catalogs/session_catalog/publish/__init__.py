"""One module per publish mechanism; each owns its publish, its fence re-check, its undo and what
follows a successful publish. ``PUBLISHERS`` maps a plan's mechanism to its function."""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_ctas.catalogs.session_catalog.context import RunContext
from airflow_provider_ctas.catalogs.session_catalog.plan import Publish
from airflow_provider_ctas.catalogs.session_catalog.publish.flip import publish_by_flip
from airflow_provider_ctas.catalogs.session_catalog.publish.partitions import publish_partitions
from airflow_provider_ctas.catalogs.session_catalog.publish.rename import publish_by_rename
from airflow_provider_ctas.catalogs.session_catalog.publish.request import Publication
from airflow_provider_ctas.catalogs.session_catalog.publish.swap import publish_by_swap

Publisher = Callable[[RunContext, Publication], None]

PUBLISHERS: dict[Publish, Publisher] = {
    Publish.RENAME: publish_by_rename,
    Publish.FLIP: publish_by_flip,
    Publish.SWAP: publish_by_swap,
    Publish.PARTITIONS: publish_partitions,
}
