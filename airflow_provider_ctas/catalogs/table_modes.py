"""The two-phase tables of the formats with their own table-wide schema (Iceberg, Delta): a whole
table is created or replaced, or (where the format's table says so) its partitions overwritten.
Each format's table adds its ``kind``, how it names its target and how it stages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_ctas.catalogs.strategy import RequestSpec
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.comments import Comments, validate_comments
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.identifiers import TableRef, validate_table_properties
from airflow_provider_ctas.core.modes import Mode, parse_mode
from airflow_provider_ctas.core.partitioning import columns_only, validate_partition_by
from airflow_provider_ctas.core.transaction import TwoPhaseTable, _exact_fields


@dataclass(kw_only=True)
class WholeTable(TwoPhaseTable):
    table_format: ClassVar[str] = ""
    """The ``table_format`` it serves ("iceberg", "delta")."""
    no_swap_because: ClassVar[str] = ""
    """Why ``allow_swap`` does not apply to this format."""
    overwrites_partitions: ClassVar[bool] = False
    """Whether the format's strategy serves ``overwrite_partitions``."""
    partition_transforms: ClassVar[bool] = False
    """Whether ``partition_by`` may use partition transforms (``days(ts)``...)."""

    @classmethod
    def validate_partition_by(cls, entries: object) -> tuple[str, ...]:
        partition_by = validate_partition_by(entries)
        return partition_by if cls.partition_transforms else columns_only(partition_by, cls.format_name)

    @classmethod
    def served_modes(cls) -> tuple[Mode, ...]:
        return tuple(m for m in Mode if cls.overwrites_partitions or m is not Mode.OVERWRITE_PARTITIONS)

    @classmethod
    def validate_mode(cls, mode: object, partition_by: tuple[str, ...] | None = None) -> Mode:
        return parse_mode(mode, served=cls.served_modes(), format_name=cls.format_name, partition_by=partition_by)

    @classmethod
    def from_request(cls, spec: RequestSpec) -> TwoPhaseTable:
        """The strategy's ``validate``: the request as this format's table, or InvalidInputError."""
        if spec.allow_swap:
            raise InvalidInputError(f"allow_swap does not apply to {cls.format_name} tables: {cls.no_swap_because}")
        partition_by = cls.validate_partition_by(spec.partition_by)
        return cls(
            key=spec.key,
            conn_id=spec.conn_id,
            target=cls.parse_target(spec.target),
            mode=cls.validate_mode(spec.mode, partition_by),
            partition_by=partition_by,
            table_properties=validate_table_properties(spec.table_properties),
            comments=validate_comments(spec.comment, spec.column_comments),
        )

    @classmethod
    def check_options(cls, mode: str, table_format: str, superseded_retention: object) -> None:
        """The strategy's DAG-parse-time checks. A replaced version stays readable through the
        format's own history (snapshots, time travel); superseded_retention is for session-catalog tables."""
        cls.validate_mode(mode)
        if not isinstance(table_format, str) or table_format.lower() != cls.table_format:
            raise InvalidInputError(f"table_format {table_format!r} is not served by the {cls.format_name} strategy")

    mode: Mode
    partition_by: tuple[str, ...] = ()
    table_properties: dict[str, str] = field(default_factory=dict)
    comments: Comments = field(default_factory=Comments)

    @property
    def replaces_partitions(self) -> bool:
        return self.mode is Mode.OVERWRITE_PARTITIONS

    def staging_table(self, try_number: int | None = None) -> TableRef:
        """A new target is staged as its own table under this reserved name, per try."""
        return self.target.with_table(markers.staging_name(self.txn_id, try_number or self.try_number))

    def spec_to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "partition_by": list(self.partition_by),
            "table_properties": dict(self.table_properties),
            "comments": self.comments.to_dict(),
        }

    @classmethod
    def spec_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        # State stored before comments existed has none: the table's own are kept.
        optional = {"comments"} & set(data)
        spec = _exact_fields(data, {"mode", "partition_by", "table_properties"} | optional, "spec")
        try:
            partition_by = cls.validate_partition_by(spec["partition_by"])
            return {
                "mode": cls.validate_mode(spec["mode"], partition_by),
                "partition_by": partition_by,
                "table_properties": validate_table_properties(spec["table_properties"]),
                "comments": Comments.from_dict(spec["comments"]) if optional else Comments(),
            }
        except InvalidInputError as exc:
            raise CorruptStateError(f"spec is invalid: {exc}") from exc
