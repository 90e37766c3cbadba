"""OpenLineage: what the provider's listener emits for a real run (file transport, own process)."""

from __future__ import annotations

import json

import pytest

from tests.support.dags import DAGS_FOLDER, make_dag
from tests.support.faults import Trial

pytestmark = pytest.mark.integration


def test_openlineage_events_describe_the_published_table(stack, spark, database, tmp_path):
    spark.sql(f"CREATE TABLE {database}.orders USING parquet AS SELECT id, id % 7 AS customer_id FROM range(70)")
    spark.sql(f"CREATE TABLE {database}.customers USING parquet AS SELECT id, concat('c', id) AS name FROM range(7)")
    target = f"{database}.enriched"
    # A CTE's tables are inputs, the CTE's name and range() are not (the driver's analysed plan says so).
    sql = (
        f"WITH o AS (SELECT id, customer_id FROM {database}.orders) "
        f"SELECT o.id, c.name FROM o JOIN {database}.customers c ON o.customer_id = c.id CROSS JOIN range(1) r"
    )
    make_dag("lineage", target_table=target, sql=sql)
    events_file = tmp_path / "events.jsonl"
    env = {
        "AIRFLOW__OPENLINEAGE__DISABLED": "False",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "ctas-tests",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
    }
    log = tmp_path / "try.log"
    state = Trial(DAGS_FOLDER / "lineage.py", "lineage", "lineage_run", log, env=env).start().wait()
    assert state == "success"

    text = events_file.read_text()
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    by_type = {event["eventType"]: event for event in events}
    assert {"START", "COMPLETE"} <= set(by_type)
    complete = by_type["COMPLETE"]
    namespace = complete["outputs"][0]["namespace"]
    assert namespace.startswith("hive://127.0.0.1:")
    assert [o["name"] for o in complete["outputs"]] == [target]
    fields = complete["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [("id", "bigint"), ("name", "string")]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 70
    assert sorted(i["name"] for i in complete["inputs"]) == [f"{database}.customers", f"{database}.orders"]
    assert {i["namespace"] for i in complete["inputs"]} == {namespace}
    assert complete["job"]["facets"]["sql"]["query"] == sql
    assert "__ctas_" not in text, "staging tables never appear as datasets"
    assert "spark.openlineage.parentJobName=lineage.ctas" in log.read_text()
