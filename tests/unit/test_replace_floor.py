"""The floor probe reports each variant's median, spread and distance from the plain CTAS."""

from __future__ import annotations

from tests.support.benchmarks import load

replace_floor = load("replace_floor")


def test_each_variant_is_set_against_the_plain_ctas_median() -> None:
    seconds = {"plain": [5.0, 5.4, 5.2], "least": [5.5, 5.3, 5.9], "registered": [6.1, 7.3, 6.4]}
    assert replace_floor.render(seconds, 1_000_000).splitlines()[4:] == [
        "| plain | 5.20 | 5.00-5.40 | +0.00 |",
        "| least | 5.50 | 5.30-5.90 | +0.30 |",
        "| registered | 6.40 | 6.10-7.30 | +1.20 |",
    ]
