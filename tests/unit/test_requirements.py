"""The fences as values: each requirement holds exactly for the try it names, and says which try
took over when it does not."""

from __future__ import annotations

import pytest

from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import FencedError
from airflow_provider_ctas.core.requirements import (
    AssertNewestFence,
    AssertNoNewerStaging,
    AssertNotSuperseded,
    AssertOwnStaging,
    Observed,
)

TXN = "dag.task.run.-1"


def _props(txn_id: str, try_number: int) -> dict[str, str]:
    return {markers.TXN_ID: txn_id, markers.TRY_NUMBER: str(try_number)}


def _marker(try_number: int, revoked_by: int | None = None, txn_id: str = TXN) -> markers.MarkerFile:
    return markers.MarkerFile(txn_id, try_number, "db.t", "2026-11-29T00:00:00Z", revoked_by=revoked_by)


@pytest.mark.parametrize(
    ("observed", "holds"),
    [
        (Observed(properties=_props(TXN, 2)), True),
        (Observed(properties=_props(TXN, 3)), False),  # a newer try adopted it
        (Observed(properties=_props("other", 2)), False),
        (Observed(properties=None), False),  # dropped by a newer try
        (Observed(marker=_marker(2)), True),
        (Observed(marker=_marker(2, revoked_by=3)), False),
        (Observed(marker=_marker(2, txn_id="other")), False),
        (Observed(marker=None), False),  # the directory's marker is gone
    ],
)
def test_only_the_try_whose_markers_the_staging_carries_owns_it(observed: Observed, holds: bool) -> None:
    requirement = AssertOwnStaging(TXN, 2, "db.staging")
    assert requirement.holds(observed) is holds
    if holds:
        requirement.validate(observed)
    else:
        with pytest.raises(FencedError, match=r"try 2 \(db\.staging\) is gone or revoked"):
            requirement.validate(observed)


@pytest.mark.parametrize(("fences", "holds"), [((), True), ((1, 2), True), ((3,), False), ((1, 4), False)])
def test_a_try_is_superseded_once_a_newer_one_raised_its_fence(fences: tuple[int, ...], holds: bool) -> None:
    assert AssertNotSuperseded(2).holds(Observed(fences=frozenset(fences))) is holds


def test_the_newest_fence_needs_this_tries_fence_on_top_and_its_branch() -> None:
    requirement = AssertNewestFence(2, "cat.db.t", "airflow_ctas_2")
    assert requirement.holds(Observed(fences=frozenset({1, 2}), refs=frozenset({"main", "airflow_ctas_2"})))
    assert not requirement.holds(Observed(fences=frozenset({1, 2}), refs=frozenset({"main"})))
    with pytest.raises(FencedError, match=r"try 3 of this task instance took over cat\.db\.t; try 2 must not publish"):
        requirement.validate(Observed(fences=frozenset({2, 3}), refs=frozenset({"airflow_ctas_2"})))
    with pytest.raises(FencedError, match="try of another run"):
        requirement.validate(Observed(fences=frozenset(), refs=frozenset({"airflow_ctas_2"})))


HEX_TXN = "0123456789abcdef01234567"
"""Reserved names carry a transaction id's first 16 characters, which are hex."""


@pytest.mark.parametrize(
    ("names", "holds"),
    [
        ((), True),
        ((markers.staging_name(HEX_TXN, 1), markers.staging_name(HEX_TXN, 2)), True),  # an older try's leftover
        ((markers.backup_name(HEX_TXN, 3),), True),  # a backup is not a try's staging
        ((markers.staging_name("fedcba9876543210", 3),), True),  # another transaction's
        ((markers.staging_name(HEX_TXN, 2), markers.staging_name(HEX_TXN, 3)), False),
        ((markers.staging_name(HEX_TXN, 12),), False),  # by number, not by text
    ],
)
def test_a_newer_try_s_staging_fences_an_older_try(names: tuple[str, ...], holds: bool) -> None:
    requirement = AssertNoNewerStaging(HEX_TXN, 2)
    observed = Observed(names=frozenset(names))
    assert requirement.holds(observed) is holds
    if not holds:
        with pytest.raises(
            FencedError, match=r"a newer try of this task instance has begun \(__ctas_.*_s1?[23] exists\); try 2"
        ):
            requirement.validate(observed)
