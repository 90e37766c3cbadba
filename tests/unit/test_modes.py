"""The one vocabulary of ``mode`` and its rules, as every strategy and the operator apply them."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.core.errors import InvalidInputError
from airflow_provider_ctas.core.modes import Mode, parse_mode


def test_every_mode_parses_and_only_create_if_not_exists_may_succeed_without_publishing():
    assert [parse_mode(m.value) for m in Mode] == list(Mode)
    assert [m for m in Mode if not m.always_publishes] == [Mode.CREATE_IF_NOT_EXISTS]


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        ("upsert", {}, "mode 'upsert' is not supported; use one of: create, create_if_not_exists, replace"),
        (None, {}, "mode None is not supported"),
        ("overwrite_partitions", {"partition_by": ()}, "needs partition_by"),
        (
            "overwrite_partitions",
            {"served": [Mode.CREATE, Mode.REPLACE], "format_name": "Foo"},
            "not supported for Foo tables yet; use mode 'replace'",
        ),
        ("create_if_not_exists", {"served": [Mode.CREATE], "format_name": "Foo"}, "for Foo; use one of: create$"),
    ],
)
def test_what_a_format_does_not_serve_or_a_mode_lacks_is_refused_with_what_to_use(value, kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        parse_mode(value, **kwargs)


def test_partition_by_is_only_checked_when_given():
    assert parse_mode("overwrite_partitions") is Mode.OVERWRITE_PARTITIONS  # templated: checked once rendered
    assert parse_mode("overwrite_partitions", partition_by=("ds",)) is Mode.OVERWRITE_PARTITIONS
