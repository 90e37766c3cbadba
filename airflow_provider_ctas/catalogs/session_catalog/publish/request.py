"""What every publish mechanism is handed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_provider_ctas.catalogs.metastore.catalog import TableInfo
from airflow_provider_ctas.catalogs.session_catalog.plan import Plan
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.core.protocol import PhaseReport


@dataclass(frozen=True)
class Publication:
    plan: Plan
    target_info: TableInfo | None
    """The target as commit found it, right before publishing (None: it does not exist)."""
    staging: TableRef
    """This try's staging table; the fence has just checked it still carries this try's markers."""
    provenance: dict[str, str]
    report: PhaseReport
    staged_partitions: Mapping[tuple[str, ...], str] | None = None
    """Where the staged partitions' data is, when no staging table says so: staging that is only a
    directory, or a managed staging table released (``partitions.release_managed_staging``); None:
    ask the staging table."""
