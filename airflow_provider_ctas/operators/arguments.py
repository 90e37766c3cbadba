"""The operator's arguments: checked when the DAG is parsed where they are already known, so a typo
fails the DAG import instead of a run at 3 a.m.; templated ones are checked once rendered, in begin,
before any Spark work."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_provider_ctas.catalogs.query import validate_query
from airflow_provider_ctas.catalogs.strategy import Strategy
from airflow_provider_ctas.core.checks import Check, validate_checks
from airflow_provider_ctas.core.comments import validate_comments
from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.identifiers import TableRef, validate_table_properties
from airflow_provider_ctas.core.modes import parse_mode
from airflow_provider_ctas.core.partitioning import validate_partition_by
from airflow_provider_ctas.runners.spark_submit import validate_submit_options

Callback = Callable[..., Any]


def callbacks(value: Callback | Sequence[Callback] | None) -> list[Callback]:
    if value is None:
        return []
    if callable(value):
        return [value]
    return list(value)


def is_templated(value: object) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def has_templates(mapping: object) -> bool:
    """A dict with a templated key or value: checked once rendered, not when the DAG is parsed."""
    return isinstance(mapping, Mapping) and any(is_templated(k) or is_templated(v) for k, v in mapping.items())


def rendered_submit_options(value: object) -> dict[str, Any]:
    """spark_submit_options once templates rendered: a dict (values may have been templates)."""
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInputError(
            f"spark_submit_options must render to a dict, got {type(value).__name__}: template its values, "
            "or render the whole dict with the DAG's render_template_as_native_obj=True"
        )
    return validate_submit_options(value)


_TRUE, _FALSE = frozenset({"true", "1", "yes", "on"}), frozenset({"false", "0", "no", "off", ""})


def durable_flag(value: object, table_format: str, strategy: Strategy) -> bool:
    """``durable`` as a bool (a template renders to a string); refused where the format cannot
    keep a prepared try for the next one."""
    if isinstance(value, str) and not is_templated(value):
        if value.strip().lower() not in _TRUE | _FALSE:
            raise InvalidInputError(f"durable must be true or false, got {value!r}")
        value = value.strip().lower() in _TRUE
    if not isinstance(value, bool) and not is_templated(value):
        raise InvalidInputError(f"durable must be true or false, got {value!r}")
    if value is True and not strategy.durable:
        raise InvalidInputError(
            f"durable=True is not supported for {table_format!r} tables yet: it keeps and adopts the staging of "
            "file-format and Delta tables in Spark's session catalog and the branch of a replaced Iceberg table"
        )
    return value is True


_TASK_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")
GROUP_MODES = ("replace", "overwrite_partitions")


def group_member(value: object, table_format: str, strategy: Strategy, mode: object) -> str | None:
    """``publish_group``: the task id of the ``PublishGroupOperator`` that publishes this table with
    the others of its group; refused where the format's catalog has no multi-table commit."""
    if value is None:
        return None
    if not isinstance(value, str) or not _TASK_ID.fullmatch(value):
        raise InvalidInputError(f"publish_group must be the task id of a PublishGroupOperator, got {value!r}")
    if not strategy.groups:
        raise InvalidInputError(
            f"publish_group is not supported for {table_format!r} tables: a group publishes in one catalog commit "
            "over several tables, which only an Iceberg REST catalog offers (Hive metastore, Glue and Delta have none)"
        )
    if isinstance(mode, str) and not is_templated(mode) and mode.lower() not in GROUP_MODES:
        raise InvalidInputError(
            f"mode {mode!r} cannot be in a publish group: a group replaces existing tables (mode 'replace' or "
            "'overwrite_partitions'); create a new table once without publish_group"
        )
    return value


def partition_list(partition_by: Sequence[str] | str | None) -> Sequence[str] | str | None:
    """One column may be given as a string; a template stays a string until it renders."""
    return [partition_by] if isinstance(partition_by, str) and not is_templated(partition_by) else partition_by


def check_known_arguments(
    strategy: Strategy,
    *,
    sql: str,
    sql_extensions: Sequence[str],
    target_table: str,
    mode: str,
    partition_by: Sequence[str] | str | None,
    table_format: str,
    table_properties: object,
    comment: object,
    column_comments: object,
    checks: Sequence[Check | Mapping[str, Any]],
) -> TableRef | None:
    """Refuse what is already wrong; the target, when it is known before templates render."""
    if not is_templated(sql) and not str(sql).endswith(tuple(sql_extensions)):
        validate_query(sql)
    target = None if is_templated(target_table) else strategy.validate_target(target_table)
    if not is_templated(partition_by):
        validate_partition_by(partition_by)
        if not is_templated(mode):
            parse_mode(mode, partition_by=partition_by or ())
    if not is_templated(table_properties) and not has_templates(table_properties):
        validate_table_properties(table_properties)
    if not is_templated(comment) and not is_templated(column_comments) and not has_templates(column_comments):
        validate_comments(comment, column_comments)
    validate_checks(checks)  # templated SQL is checked again, rendered, before any Spark work
    if checks and not strategy.audits:
        raise InvalidInputError(f"checks are not supported for {table_format!r} tables yet; remove checks=")
    return target
