"""Which of a target's OPTIONS a try's write repeats, and when it refuses to write at all."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.catalogs.metastore.catalog import TableInfo
from airflow_provider_ctas.catalogs.session_catalog.begin import _storage_options
from airflow_provider_ctas.core.errors import UnsupportedTargetError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.catalog_entry import REDACTED, parse_storage_properties, without_path


def _target(options: dict[str, str]) -> TableInfo:
    return TableInfo("MANAGED", "file:/w/t", "csv", {}, [("id", "bigint")], [], False, options, ref=TableRef("db", "t"))


def test_a_flip_and_a_partition_switch_write_with_the_target_s_options() -> None:
    options = {"sep": ";", "header": "true"}
    assert _storage_options(_target(options)) == options


def test_an_option_only_shown_redacted_is_refused_by_name() -> None:
    target = _target({"sep": ";", "auth.token": REDACTED})
    with pytest.raises(UnsupportedTargetError, match=r"db\.t has storage option\(s\) \['auth.token'\]"):
        _storage_options(target)


def test_the_location_is_not_an_option() -> None:
    assert without_path({"path": "file:/w/t", "PATH": "x", "sep": ";"}) == {"sep": ";"}


def test_describe_s_row_of_options_is_read_back_even_where_a_value_holds_its_separator() -> None:
    shown = '[my.secret=*********(redacted), header=true, sep=, , quote="]'  # Spark 4.3's DESCRIBE
    assert parse_storage_properties(shown) == {"my.secret": REDACTED, "header": "true", "sep": ", ", "quote": '"'}
    assert parse_storage_properties("[compression=zstd]") == {"compression": "zstd"}
