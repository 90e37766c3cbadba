"""``PublishGroupOperator``: the live task that decides and publishes a publish group.

Its members are the ``AtomicCtasOperator`` tasks upstream of it whose ``publish_group`` names it.
Each member stages, audits and holds its table (its own try, its own fences); this task runs once
they are all done (``trigger_rule="all_done"``): if every member holds, it publishes them all in one
catalog commit, with each member's requirements (its held branch still at its snapshot, ``main``
where it began); if any member did not hold (failed, killed, skipped), it removes the others'
staging and fails, so no member is published.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from airflow.providers.common.compat.assets import AssetAlias
from airflow.providers.common.compat.sdk import BaseOperator

from airflow_provider_ctas.catalogs import load_two_phase_table, strategy_for
from airflow_provider_ctas.catalogs.iceberg.group_table import IcebergGroup
from airflow_provider_ctas.catalogs.iceberg.table import IcebergTable
from airflow_provider_ctas.core.errors import CtasError, GroupMemberFailedError, InvalidInputError
from airflow_provider_ctas.core.protocol import ABORT_PHASES, GROUP_COMMIT_PHASES, PhaseRequest
from airflow_provider_ctas.core.transaction import Outcome, TransactionKey, TwoPhaseTable, TxnState
from airflow_provider_ctas.operators.arguments import rendered_submit_options
from airflow_provider_ctas.operators.assets import table_asset
from airflow_provider_ctas.operators.atomic_ctas import AtomicCtasOperator
from airflow_provider_ctas.operators.lifecycle import now
from airflow_provider_ctas.operators.state import XCOM_KEY, raise_for_airflow, run_failure
from airflow_provider_ctas.runners import Runner, runner_for
from airflow_provider_ctas.runners.spark_submit import faults_from_environment

if TYPE_CHECKING:
    from airflow.sdk import Context


class PublishGroupOperator(BaseOperator):
    """Publish the tables of its upstream ``AtomicCtasOperator(publish_group=<this task id>)`` tasks
    together: all in one catalog commit, or none.

    :param conn_id: the spark-submit connection for the publishing run (default: the first member's).
    :param conf: Spark configuration naming the members' catalog (default: the first member's).
    :param spark_submit_options: further ``SparkSubmitHook`` arguments (default: the first member's).
    :param asset_events: announce each member's publish as an asset event for its table's asset
        (through the alias ``airflow-ctas-group:<dag_id>.<task_id>``), only when the group published.
    """

    template_fields = ("conn_id", "conf")
    ui_color = "#c9e4d2"

    def __init__(
        self,
        *,
        conn_id: str | None = None,
        conf: Mapping[str, Any] | None = None,
        spark_submit_options: Mapping[str, Any] | None = None,
        asset_events: bool = True,
        trigger_rule: str = "all_done",
        **kwargs: Any,
    ) -> None:
        super().__init__(trigger_rule=trigger_rule, **kwargs)
        self.conn_id = conn_id
        self.conf = conf
        self.spark_submit_options = spark_submit_options
        self.asset_events = asset_events
        self._runner: Runner | None = None
        if asset_events:
            self.outlets.append(AssetAlias(name=self._alias_name))

    @property
    def _alias_name(self) -> str:
        return f"airflow-ctas-group:{self.dag_id}.{self.task_id}"

    def members(self) -> list[AtomicCtasOperator]:
        """The group's members, each upstream of this task (so it runs once they are done)."""
        found = [t for t in self.dag.tasks if isinstance(t, AtomicCtasOperator) and t.publish_group == self.task_id]
        if not found:
            raise InvalidInputError(f"no AtomicCtasOperator names publish_group={self.task_id!r}")
        loose = sorted(t.task_id for t in found if t.task_id not in self.upstream_task_ids)
        if loose:
            raise InvalidInputError(f"members {loose} of publish group {self.task_id!r} must be upstream of it")
        return sorted(found, key=lambda t: t.task_id)

    def _runner_for(self, first: AtomicCtasOperator) -> Runner:
        options = rendered_submit_options(
            self.spark_submit_options if self.spark_submit_options is not None else first.spark_submit_options
        )
        conf = dict(self.conf if self.conf is not None else first.conf or {})
        return runner_for(self.conn_id or first.conn_id, conf=conf, submit_options=options, log=self.log)

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            members = self.members()
            tables = {m.task_id: _member_table(context, m.task_id) for m in members}
            self._runner = self._runner_for(members[0])
            held = [t for t in tables.values() if _holds(t)]
            missing = sorted(task for task, t in tables.items() if not _holds(t) and not _published(t))
            if missing:
                self._abort(context, [t for t in tables.values() if isinstance(t, IcebergTable) and not _published(t)])
                raise GroupMemberFailedError(
                    f"publish group {self.task_id!r}: members {missing} did not prepare; no member was published"
                    + (f" and the staging of {sorted(str(t.target) for t in held)} was removed" if held else "")
                )
            details = self._publish(context, held) if held else {}
        except CtasError as exc:
            raise_for_airflow(exc)
        published = {
            t.target.qualified: {"outcome": Outcome.ALREADY_PUBLISHED.value} for t in tables.values() if _published(t)
        }
        landed = details.get("members")
        published.update(landed if isinstance(landed, dict) else {})
        self._announce(context, tables, published, details)
        return {"group": self.task_id, "members": published}

    def _group(self, context: Context, held: list[IcebergTable]) -> IcebergGroup:
        ti = context["ti"]
        map_index = -1 if ti.map_index is None else ti.map_index
        key = TransactionKey(dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=map_index)
        conn_id = self.conn_id or held[0].conn_id
        group = IcebergGroup(key=key, conn_id=conn_id, target=held[0].target, members=tuple(held))
        group.begin(ti.try_number, now())
        return group

    def _publish(self, context: Context, held: list[IcebergTable]) -> dict[str, Any]:
        """The group commit's run; its details (``members``: each one's outcome and snapshot)."""
        group, started = self._group(context, held), time.monotonic()
        assert self._runner is not None
        request = PhaseRequest(phases=GROUP_COMMIT_PHASES, table=group.to_dict(), faults=faults_from_environment())
        names = ", ".join(str(t.target) for t in held)
        self.log.info("commit: publishing %s in one catalog commit (publish group %s)", names, self.task_id)
        result = self._runner.run(request, name=f"airflow-ctas group {self.task_id} try {group.try_number}")
        if not result.ok:
            raise run_failure(result.error or {}, retry_on_failed_checks=False)
        self.log.info("commit: ok in %.2fs; %s", time.monotonic() - started, result.details.get("members"))
        return result.details

    def _abort(self, context: Context, members: list[IcebergTable]) -> None:
        """Removes the staging of every member's tries up to the one its XCom names (held or not)."""
        if not members or self._runner is None:
            return
        group = self._group(context, members)
        request = PhaseRequest(phases=ABORT_PHASES, table=group.to_dict(), faults=faults_from_environment())
        result = self._runner.run(request, name=f"airflow-ctas group {self.task_id} abort")
        if result.ok:
            self.log.info("abort: the members' staging is removed")
        else:
            self.log.error("abort: failed (%s); the members' next tries or a GC pass remove it", result.error)

    def _announce(
        self,
        context: Context,
        tables: Mapping[str, TwoPhaseTable | None],
        published: dict[str, Any],
        details: Mapping[str, Any],
    ) -> None:
        if not self.asset_events or not published:
            return
        namespace = strategy_for("iceberg").namespace_after_run(self.conf, details)
        alias = AssetAlias(name=self._alias_name)
        for table in tables.values():
            if table is None or table.target.qualified not in published:
                continue
            extra = {**published[table.target.qualified], "publish_group": self.task_id, "txn_id": table.txn_id}
            context["outlet_events"][alias].add(table_asset(namespace, table.target), extra=extra)
            self.log.info("asset event for %s (alias %s)", table.target, alias.name)

    def on_kill(self) -> None:
        if self._runner is not None:
            self._runner.kill()


def _member_table(context: Context, task_id: str) -> TwoPhaseTable | None:
    value = context["ti"].xcom_pull(task_ids=task_id, key=XCOM_KEY)
    return None if value is None else load_two_phase_table(value)


def _holds(table: TwoPhaseTable | None) -> TypeGuard[IcebergTable]:
    return isinstance(table, IcebergTable) and table.state is TxnState.PREPARED and "held" in table.details


def _published(table: TwoPhaseTable | None) -> TypeGuard[TwoPhaseTable]:
    """A member whose retry found its table already published by this group's earlier commit."""
    return table is not None and table.state is TxnState.COMMITTED and table.outcome is not None
