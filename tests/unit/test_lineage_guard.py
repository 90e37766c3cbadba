"""Lineage is a by-product of begin: a failure reading the plan must cost the lineage, not the run."""

from typing import Any, cast

from airflow_provider_ctas.catalogs.analysis import lineage_inputs
from tests.support.reporter import RecordingReporter


class _Engine:
    def __init__(self, result: list[str] | Exception) -> None:
        self.result = result

    def input_tables(self, frame: object) -> list[str] | None:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_a_failing_plan_walk_is_logged_and_skipped() -> None:
    log = RecordingReporter()
    error = RuntimeError("py4j.Py4JException: Method tableMeta([]) does not exist\n\tat ...")
    assert lineage_inputs(cast(Any, _Engine(error)), cast(Any, None), log) is None
    assert log.warnings == [
        "lineage: could not read the query's input tables from its plan: "
        "py4j.Py4JException: Method tableMeta([]) does not exist"
    ]


def test_the_plan_inputs_pass_through() -> None:
    log = RecordingReporter()
    assert lineage_inputs(cast(Any, _Engine(["sales.orders"])), cast(Any, None), log) == ["sales.orders"]
    assert log.warnings == []
