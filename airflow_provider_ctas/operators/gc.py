"""``AtomicCtasGcOperator``: the maintenance-DAG face of garbage collection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import BaseOperator

from airflow_provider_ctas.core.identifiers import validate_name
from airflow_provider_ctas.gc import collect_garbage

if TYPE_CHECKING:
    from airflow.sdk import Context

# Task-instance states in which a transaction may still be writing or about to retry.
ACTIVE_STATES = frozenset(
    {"running", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "deferred", "restarting"}
)


class AtomicCtasGcOperator(BaseOperator):
    """Remove staging that failed, killed or crashed AtomicCtasOperator tasks left behind.

    Two passes: a dry run lists candidates with the task instance each belongs to, Airflow is asked
    which of those are still active, and the real pass removes the rest. ``catalog`` names an Iceberg
    catalog (configured in ``conf``) whose namespaces ``databases`` are. Only what carries this
    provider's markers, is older than ``min_age`` and no table reads from is ever removed.
    """

    template_fields: Sequence[str] = ("databases",)

    def __init__(
        self,
        *,
        databases: Sequence[str],
        conn_id: str = "spark_default",
        min_age: timedelta = timedelta(hours=24),
        list_only: bool = False,
        conf: Mapping[str, Any] | None = None,
        spark_submit_options: Mapping[str, Any] | None = None,
        catalog: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for database in databases:
            if "{{" not in database:
                validate_name(database, "database")
        self.databases = list(databases)
        self.conn_id = conn_id
        self.min_age = min_age
        self.list_only = list_only
        self.conf = conf
        self.spark_submit_options = spark_submit_options
        self.catalog = None if catalog is None else validate_name(catalog, "catalog")

    def _pass(self, *, dry_run: bool, protect: set[str]) -> dict[str, Any]:
        return collect_garbage(
            databases=self.databases,
            conn_id=self.conn_id,
            min_age=self.min_age,
            dry_run=dry_run,
            protect=protect,
            conf=self.conf,
            submit_options=self.spark_submit_options,
            catalog=self.catalog,
        )

    def _active_transactions(self, context: Context, entries: list[dict[str, Any]]) -> set[str]:
        ti = context["ti"]
        protect = set()
        for entry in entries:
            task = entry.get("task") or {}
            if not entry["action"].startswith("would be") or not task.get("dag_id") or not task.get("run_id"):
                continue
            states = ti.get_task_states(dag_id=task["dag_id"], task_ids=[task["task_id"]], run_ids=[task["run_id"]])
            state = states.get(task["run_id"], {}).get(task["task_id"])
            if state in ACTIVE_STATES:
                self.log.info("gc: %s belongs to %s, which is %s: keeping it", entry["what"], task, state)
                protect.add(entry["txn_id"])
        return protect

    def execute(self, context: Context) -> dict[str, Any]:
        listing = self._pass(dry_run=True, protect=set())
        if self.list_only:
            return listing
        protect = self._active_transactions(context, listing["entries"])
        report = self._pass(dry_run=False, protect=protect)
        self.log.info("gc: %s", report["summary"] or "nothing to collect")
        return report
