"""What a table or commit this provider writes carries: this try's markers, stamped with the
provider's version, and for a table it creates the user's table properties under them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from airflow_provider_ctas import __version__
from airflow_provider_ctas.catalogs.metastore.catalog import now_iso


class MarkedTable(Protocol):
    @property
    def table_properties(self) -> Mapping[str, str]: ...

    def marker_properties(self, *, created_at: str, provider_version: str) -> dict[str, str]: ...


def try_markers(table: MarkedTable, created_at: str | None = None) -> dict[str, str]:
    return table.marker_properties(created_at=created_at or now_iso(), provider_version=__version__)


def new_table_properties(table: MarkedTable, created_at: str | None = None) -> dict[str, str]:
    """The user's table properties, then the markers: a user's property cannot pose as a marker."""
    return {**table.table_properties, **try_markers(table, created_at)}
