"""OpenLineage: what the provider's listener emits for a real run (file transport, own process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.dags import DAGS_FOLDER, make_dag
from tests.support.faults import Trial

pytestmark = pytest.mark.integration
OPENLINEAGE_SPARK = "io.openlineage:openlineage-spark_2.13:1.53.0"


def _openlineage_env(events_file: Path) -> dict[str, str]:
    """Airflow's OpenLineage provider on, writing to a file, telling Spark its parent job."""
    return {
        "AIRFLOW__OPENLINEAGE__DISABLED": "False",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "ctas-tests",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
    }


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _names(datasets: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """A Spark listener dataset's catalog names (its symlinks; the dataset itself is named by path)."""
    return {
        (symlink["namespace"], symlink["name"])
        for dataset in datasets
        for symlink in dataset.get("facets", {}).get("symlinks", {}).get("identifiers", [])
    }


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
    log = tmp_path / "try.log"
    state = Trial(DAGS_FOLDER / "lineage.py", "lineage", "lineage_run", log, env=_openlineage_env(events_file))
    assert state.start().wait() == "success"

    text = events_file.read_text()
    events = _events(events_file)
    by_type = {event["eventType"]: event for event in events}
    assert {"START", "COMPLETE"} <= set(by_type)
    complete = by_type["COMPLETE"]
    namespace = complete["outputs"][0]["namespace"]
    assert namespace.startswith("hive://127.0.0.1:")
    assert [o["name"] for o in complete["outputs"]] == [target]
    fields = complete["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [("id", "bigint"), ("name", "string")]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 70
    published = complete["outputs"][0]["facets"]
    assert published["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    (location,) = published["symlinks"]["identifiers"]
    assert (location["namespace"], location["type"]) == ("file", "LOCATION") and location["name"].endswith("/enriched")
    assert "lifecycleStateChange" not in by_type["START"]["outputs"][0]["facets"], "nothing was published yet"
    assert sorted(i["name"] for i in complete["inputs"]) == [f"{database}.customers", f"{database}.orders"]
    assert {i["namespace"] for i in complete["inputs"]} == {namespace}
    lineage = published["columnLineage"]["fields"]
    assert {column: [(f["name"], f["field"], f["transformations"][0]["subtype"]) for f in entry["inputFields"]]
            for column, entry in lineage.items()} == {
        "id": [(f"{database}.orders", "id", "IDENTITY")],
        "name": [(f"{database}.customers", "name", "IDENTITY")],
    }, "each column from the table and column the plan read it from"  # fmt: skip
    assert "columnLineage" not in by_type["START"]["outputs"][0]["facets"], "the driver has not run yet"
    assert complete["job"]["facets"]["sql"]["query"] == sql
    assert "__ctas_" not in text, "staging tables never appear as datasets"
    assert "spark.openlineage.parentJobName=lineage.ctas" in log.read_text()


@pytest.mark.slow
def test_spark_openlineage_listener_joins_our_events_and_never_names_staging_as_the_target(
    stack, spark, database, tmp_path
):
    """With Spark's own OpenLineage listener on (the real jar), its events are children of the
    task's run and name the same catalog datasets as the provider's; the writes appear under the
    staging table's own name (a flip's under its staging directory), and the target appears only with
    the publish."""
    jar = subprocess.run(
        [sys.executable, "scripts/fetch_jars.py", "--path", OPENLINEAGE_SPARK],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    spark.sql(f"CREATE TABLE {database}.orders USING parquet AS SELECT id, id % 7 AS customer_id FROM range(70)")
    target = f"{database}.enriched"
    for mode in ("create", "replace"):  # the rename, then the same-shape replace's location flip
        spark_events, events_file = tmp_path / f"spark-{mode}.jsonl", tmp_path / f"airflow-{mode}.jsonl"
        listener = {
            "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(spark_events),
        }
        sql = f"SELECT id, customer_id FROM {database}.orders"
        make_dag(
            f"listener_{mode}",
            target_table=target,
            sql=sql,
            mode=mode,
            conf=listener,
            spark_submit_options={"jars": jar},
        )
        trial = Trial(
            DAGS_FOLDER / f"listener_{mode}.py",
            f"listener_{mode}",
            "run",
            tmp_path / f"{mode}.log",
            env=_openlineage_env(events_file),
        )
        assert trial.start().wait() == "success"

        ours = {event["eventType"]: event for event in _events(events_file)}
        theirs = _events(spark_events)
        namespace = ours["COMPLETE"]["outputs"][0]["namespace"]
        assert namespace.startswith("hive://127.0.0.1:")
        # The Spark application is a child of the task's run.
        application = [
            e for e in theirs if e["run"]["facets"].get("parent", {}).get("job", {}).get("namespace") == "ctas-tests"
        ]
        assert application
        assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in application} == {ours["START"]["run"]["runId"]}
        assert {e["run"]["facets"]["parent"]["job"]["name"] for e in application} == {f"listener_{mode}.ctas"}
        # Same dataset names: our input and output are names the listener gives too.
        their_inputs = _names([d for e in theirs for d in e.get("inputs", [])])
        their_outputs = [(e, _names(e.get("outputs", []))) for e in theirs]
        assert {(i["namespace"], i["name"]) for i in ours["COMPLETE"]["inputs"]} == {(namespace, f"{database}.orders")}
        assert (namespace, f"{database}.orders") in their_inputs
        assert (namespace, target) in set().union(*(names for _, names in their_outputs))
        # The query's writes went to staging: the staging table, under its own name (create), or a
        # flip's staging directory, by path; the target is named only by the step that published it.
        writes = [(e, names) for e, names in their_outputs if "insert_into" in e["job"]["name"]]
        assert writes
        for event, names in writes:
            assert all("__ctas_" in output["name"] for output in event["outputs"]), event["outputs"]
            assert all("__ctas_" in name for _, name in names)
            assert names or mode == "replace", "a staging table is named by its catalog name"
        publishing = {e["job"]["name"].split(".")[1] for e, names in their_outputs if (namespace, target) in names}
        assert publishing and all(step.startswith("execute_alter_table") for step in publishing), publishing


def test_the_plan_names_tables_and_paths_it_reads_as_inputs(spark, database, tmp_path):
    """The driver's own plan walk (in this test's classic session): a session-catalog table as
    ``database.table``, files read by path as OpenLineage names files; ``range()`` is not an input."""
    from airflow_provider_ctas.catalogs.analysis import lineage_inputs
    from airflow_provider_ctas.spark.engine import ClassicEngine

    files = tmp_path / "events"
    spark.range(3).write.parquet(str(files))
    spark.sql(f"CREATE TABLE {database}.dims USING parquet AS SELECT 1 AS id")
    frame = spark.sql(
        f"SELECT e.id FROM parquet.`{files.as_uri()}` AS e JOIN {database}.dims AS d ON e.id = d.id CROSS JOIN range(2)"
    )
    warnings: list[str] = []
    log = type("Log", (), {"warning": lambda self, message: warnings.append(message)})()
    assert lineage_inputs(ClassicEngine(spark), frame, log) == [
        f"{database}.dims", {"namespace": "file", "name": str(files)}
    ]  # fmt: skip
    assert warnings == []


def test_a_jdbc_table_is_named_after_its_source_without_its_credentials(spark, database):
    """A catalog table ``USING jdbc`` (here over Derby, whose driver pyspark ships) is an input named
    after the database it reads, as OpenLineage names JDBC sources; its URL's settings stay out."""
    from airflow_provider_ctas.catalogs.analysis import lineage_inputs
    from airflow_provider_ctas.spark.engine import ClassicEngine

    url = f"jdbc:derby:memory:{database};create=true;user=app;password=secret"
    spark.range(3).write.jdbc(url, "ORDERS", mode="overwrite")
    spark.sql(f"CREATE TABLE {database}.orders_jdbc USING jdbc OPTIONS (url '{url}', dbtable 'ORDERS')")
    frame = spark.sql(f"SELECT o.id FROM {database}.orders_jdbc AS o CROSS JOIN range(2)")
    warnings: list[str] = []
    log = type("Log", (), {"warning": lambda self, message: warnings.append(message)})()
    inputs = lineage_inputs(ClassicEngine(spark), frame, log)
    assert inputs == [{"namespace": f"derby:memory:{database}", "name": "ORDERS"}], warnings
    assert "secret" not in str(inputs)


def test_column_lineage_follows_each_column_through_ctes_joins_aggregates_and_unions(spark, database):
    """The driver's plan walk, per output column: where its values come from and how (OpenLineage's
    DIRECT subtypes); a literal comes from no column. What it costs is logged, and measured here."""
    from airflow_provider_ctas.catalogs.analysis import lineage_columns, lineage_inputs
    from airflow_provider_ctas.catalogs.query import as_subquery
    from airflow_provider_ctas.spark.engine import ClassicEngine

    spark.sql(f"CREATE TABLE {database}.orders USING parquet AS SELECT id, id * 1.5 AS amount FROM range(5)")
    spark.sql(f"CREATE TABLE {database}.people USING parquet AS SELECT id, concat('p', id) AS name FROM range(5)")
    sql = f"""
        WITH big AS (SELECT id, amount FROM {database}.orders WHERE amount > 1)
        SELECT b.id, upper(p.name) AS name, sum(b.amount) AS total, 'x' AS tag
        FROM big AS b JOIN {database}.people AS p ON b.id = p.id GROUP BY b.id, p.name
        UNION ALL
        SELECT id, name, 0, 'y' FROM {database}.people
    """
    frame = spark.sql(as_subquery(sql))
    messages: list[str] = []
    log = type("Log", (), {"warning": lambda self, m: messages.append(m), "info": lambda self, m: messages.append(m)})()
    engine = ClassicEngine(spark)
    assert lineage_inputs(engine, frame, log) == [f"{database}.orders", f"{database}.people"]
    orders, people = 0, 1
    assert lineage_columns(engine, frame, log) == {
        "id": [[orders, "id", "IDENTITY"], [people, "id", "IDENTITY"]],
        "name": [[people, "name", "TRANSFORMATION"]],
        "total": [[orders, "amount", "AGGREGATION"]],
        "tag": [],
    }
    assert len(messages) == 1 and messages[0].startswith("lineage: the inputs of 4 column(s) read from the plan in")
