"""Construction-time behaviour of the operator (pure logic; the lifecycle is proven end to end)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_ctas.catalogs import create_two_phase_table, load_two_phase_table
from airflow_provider_ctas.catalogs.delta.table import DeltaTable, write_version
from airflow_provider_ctas.core.errors import AtomicityNotSupportedError, InvalidInputError
from airflow_provider_ctas.core.transaction import TransactionKey
from airflow_provider_ctas.operators import AtomicCtasOperator
from airflow_provider_ctas.operators.lifecycle import ctas_abort, ctas_begin, ctas_finalize


def make(**kwargs) -> AtomicCtasOperator:
    options: dict[str, Any] = {"task_id": "t", "sql": "SELECT 1", "target_table": "db.t"}
    options.update(kwargs)
    return AtomicCtasOperator(**options)


def test_lifecycle_callbacks_come_first_and_user_callbacks_still_run():
    def mine(context):
        return None

    op = make(on_success_callback=mine, on_failure_callback=[mine, mine])
    assert op.on_execute_callback == [ctas_begin]
    assert op.on_success_callback == [ctas_finalize, mine]
    assert op.on_failure_callback == [ctas_abort, mine, mine]
    assert op.on_retry_callback == [ctas_abort]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "upsert"}, "mode 'upsert' is not supported"),
        ({"target_table": "db.t;x"}, "contains"),
        ({"target_table": "a.b.c.d"}, "4 parts"),
        ({"partition_by": ["a b"]}, "contains"),
        ({"table_properties": {"owner": "me"}}, "reserved by Spark"),
        ({"table_properties": {"Comment": "x"}}, "pass comment= to the operator"),
        ({"column_comments": {"a b": "x"}}, "column_comments key 'a b' contains"),
        ({"comment": ["x"]}, "comment must be a string"),
        ({"spark_submit_options": {"application": "evil.py"}}, "unsupported keys"),
    ],
)
def test_bad_arguments_fail_at_dag_parse_time(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        make(**kwargs)


@pytest.mark.parametrize("table_format", ["PAIMON", "hudi", "xml"])
def test_a_format_no_strategy_serves_is_refused_as_not_atomic(table_format):
    """The registry answers for formats: one it has no strategy for is ATOMICITY_NOT_SUPPORTED, with
    what to do instead for the table formats whose own CTAS is atomic."""
    with pytest.raises(AtomicityNotSupportedError) as raised:
        make(table_format=table_format)
    assert raised.value.code == "ATOMICITY_NOT_SUPPORTED"
    if table_format != "xml":
        assert "StagingTableCatalog" in str(raised.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_table": "db.t"}, "must name its catalog: catalog.database.table"),
        ({"target_table": "spark_catalog.db.t"}, "needs its own catalog"),
        ({"target_table": "ice.db.t", "mode": "overwrite_partitions"}, "needs partition_by"),
        ({"target_table": "ice.db.__ctas_x"}, "reserved for this provider"),
    ],
)
def test_iceberg_targets_name_their_catalog_and_modes_are_checked_at_parse_time(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        make(table_format="iceberg", **kwargs)


def test_every_table_format_stages_a_version_that_checks_can_read():
    checks = [{"type": "row_count", "min": 1}]
    assert make(table_format="delta", target_table="db.t", mode="replace", checks=checks).checks == checks
    assert make(table_format="iceberg", target_table="ice.db.t", mode="replace", checks=checks).checks == checks


def test_an_iceberg_table_round_trips_with_its_catalog():
    op = make(table_format="ICEBERG", target_table="Ice.Db.T", mode="replace")
    assert op.table_format == "iceberg"
    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"),
        conn_id="spark_default",
        target="ice.db.t",
        mode="replace",
        table_format="iceberg",
    )
    loaded = load_two_phase_table(table.to_json())
    assert loaded.kind == "iceberg" and loaded.target.qualified == "ice.db.t"
    assert loaded.to_dict() == table.to_dict()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_table": "lake.db.t"}, "only Spark's session catalog"),
        ({"mode": "overwrite_partitions"}, "needs partition_by"),
        ({"mode": "upsert"}, "use one of: create, create_if_not_exists, replace, overwrite_partitions"),
        ({"target_table": "db.__ctas_x"}, "reserved for this provider"),
    ],
)
def test_delta_targets_are_in_the_session_catalog_and_modes_are_checked_at_parse_time(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        make(table_format="delta", **kwargs)


def test_a_delta_table_round_trips_and_its_tries_are_ordered_by_their_delta_versions():
    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"), conn_id="spark_default", target="db.t", mode="replace", table_format="DELTA"
    )
    loaded = load_two_phase_table(table.to_json())
    assert isinstance(loaded, DeltaTable) and loaded.target.qualified == "spark_catalog.db.t"
    assert loaded.to_dict() == table.to_dict() and loaded.app_id == f"airflow_ctas:{table.txn_id}"
    # The next try's begin records this try's version: Delta then skips or refuses this try's write.
    assert [write_version(t) for t in range(1, 5)] == [1, 2, 3, 4]
    with pytest.raises(InvalidInputError, match="a replace is one Delta commit"):
        create_two_phase_table(key=table.key, conn_id="c", target="db.t", mode="replace", table_format="delta",
                               allow_swap=True)  # fmt: skip


def test_templated_values_are_checked_later():
    op = make(target_table="db.t_{{ ds_nodash }}", partition_by="{{ params.cols }}")
    assert op.target_table == "db.t_{{ ds_nodash }}"


def test_template_fields_match_spark_sql_operator_conventions():
    assert AtomicCtasOperator.template_ext == (".sql", ".hql")  # as SparkSqlOperator
    assert {"sql", "target_table", "partition_by", "table_properties", "conf"} <= set(
        AtomicCtasOperator.template_fields
    )
    assert make(partition_by="country").partition_by == ["country"]


def test_superseded_retention_is_validated_at_parse_time():
    import datetime

    from airflow_provider_ctas.catalogs.session_catalog.table import validate_retention

    assert validate_retention(datetime.timedelta(hours=2)) == 7200
    assert validate_retention(0) == 0
    for bad in (-1, "1h", True, 400 * 86400):
        with pytest.raises(InvalidInputError, match="superseded_retention"):
            validate_retention(bad)


def test_an_abort_delivered_outside_the_try_starts_no_spark_work(monkeypatch):
    """The DAG processor runs a lost worker's failure callback on a fresh operator, possibly late and
    twice, while a newer try writes: it must not act on whatever transaction the stored state names."""
    from types import SimpleNamespace

    from airflow_provider_ctas.catalogs import create_two_phase_table
    from airflow_provider_ctas.core.transaction import TransactionKey

    def no_spark(*args, **kwargs):
        raise AssertionError("the callback started Spark work")

    op = make()
    monkeypatch.setattr(op, "_new_runner", no_spark)
    monkeypatch.setattr("airflow_provider_ctas.operators.lifecycle.xcom_table", no_spark)
    failed_try_1: Any = {"ti": SimpleNamespace(try_number=1), "task": op}
    ctas_abort(failed_try_1)  # fresh operator: it ran no try
    ctas_abort(failed_try_1)  # delivered again

    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"), conn_id="spark_default", target="db.t", mode="create", table_format="parquet"
    )
    table.begin(2, "2024-01-01T00:00:00+00:00")
    op._txn = table  # this process runs try 2; a late callback for try 1 arrives
    ctas_abort(failed_try_1)


def test_checks_render_with_the_audit_views_and_are_validated_at_parse_time():
    from airflow_provider_ctas.checks import NotNull, SqlCheck
    from airflow_provider_ctas.core.checks import PUBLISHED_VIEW, STAGED_VIEW

    op = make(
        checks=[
            NotNull("a"),
            SqlCheck(name="shrinks", sql="SELECT 1 FROM {{ staged }} JOIN {{ published }} WHERE {{ params.x }}"),
            {"type": "sql", "name": "dict form", "sql": "SELECT * FROM {{ result }} WHERE false"},
        ]
    )
    op.render_template_fields({"params": {"x": "true"}})
    rendered: list[Any] = op.checks
    assert rendered[1].sql == f"SELECT 1 FROM {STAGED_VIEW} JOIN {PUBLISHED_VIEW} WHERE true"
    assert rendered[2]["sql"] == "SELECT * FROM __airflow_ctas_result__ WHERE false"
    with pytest.raises(InvalidInputError, match="unknown check type"):
        make(checks=[{"type": "not_a_check"}])


@pytest.mark.parametrize("retry", [False, True])
def test_a_failed_audit_retries_only_when_the_task_asks(retry):
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_ctas.operators.state import raise_for_airflow, run_failure

    failure = run_failure({"code": "AUDIT_FAILED", "message": "1 of 1 check(s) failed"}, retry_on_failed_checks=retry)
    assert failure.code == "AUDIT_FAILED" and failure.retryable is retry
    with pytest.raises(Exception, match=r"\[AUDIT_FAILED\] 1 of 1") as raised:
        raise_for_airflow(failure)
    assert isinstance(raised.value, AirflowFailException) is not retry
    assert run_failure({"code": "QUERY_FAILED", "message": ""}, retry_on_failed_checks=True).retryable is False


def test_lineage_names_the_metastore_the_driver_reported_using(monkeypatch, tmp_path):
    from airflow_provider_ctas.catalogs.metastore.namespace import metastore_namespace

    (tmp_path / "spark-defaults.conf").write_text("spark.hadoop.hive.metastore.uris thrift://from-file:9083\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert metastore_namespace(None) == "hive://from-file:9083"  # before the run: what the conf says
    conf = {"spark.hadoop.hive.metastore.uris": "thrift://from-conf:1234,thrift://other:1"}
    assert metastore_namespace(conf) == "hive://from-conf:1234"
    assert metastore_namespace(conf, {"metastore_uris": "thrift://hms.prod:9083"}) == "hive://hms.prod:9083"
    assert metastore_namespace(conf, {"metastore_uris": ""}) == "hive://embedded"  # the driver used none


def test_lineage_inputs_come_from_the_driver_once_it_ran_and_the_sql_is_the_job_facet():
    from airflow_provider_ctas.operators.lineage import lineage

    sql = "WITH o AS (SELECT * FROM db.orders) SELECT * FROM o CROSS JOIN range(3)"
    before = lineage(namespace="hive://embedded", sql=sql, target="db.t", details=None, complete=False)
    after = lineage(
        namespace="hive://embedded", sql=sql, target="db.t", details={"inputs": ["db.orders"]}, complete=True
    )
    assert [d.name for d in after.inputs] == ["db.orders"]
    assert before.job_facets["sql"].query == sql  # before the driver ran: inputs from the SQL parser
    assert after.job_facets["sql"].query == sql and after.outputs[0].name == "db.t"


def test_an_input_of_another_catalog_keeps_its_own_namespace():
    from airflow_provider_ctas.operators.lineage import lineage

    inputs = ["db.orders", {"namespace": "https://catalog:443/api", "name": "sales.events"}]
    done = lineage(namespace="hive://ms:9083", sql="SELECT 1", target="db.t", details={"inputs": inputs},
                   complete=True)  # fmt: skip
    assert [(d.namespace, d.name) for d in done.inputs] == [
        ("hive://ms:9083", "db.orders"), ("https://catalog:443/api", "sales.events")
    ]  # fmt: skip


def test_column_lineage_names_each_output_column_s_inputs_in_their_own_namespaces():
    from openlineage.client.serde import Serde

    from airflow_provider_ctas.operators.lineage import lineage

    inputs = ["db.orders", {"namespace": "https://catalog:443/api", "name": "sales.people"}]
    columns = {
        "id": [[0, "id", "IDENTITY"], [1, "id", "IDENTITY"]],
        "total": [[0, "amount", "AGGREGATION"]],
        "tag": [],
        "stale": [[7, "gone", "IDENTITY"]],  # an index no input has: left out, never guessed
    }
    done = lineage(namespace="hive://ms:9083", sql="SELECT 1", target="db.t", complete=True,
                   details={"inputs": inputs, "column_lineage": columns})  # fmt: skip
    facet = Serde.to_dict(done.outputs[0].facets["columnLineage"])
    assert facet["_schemaURL"].endswith("/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet")
    assert set(facet["fields"]) == {"id", "total"}
    assert facet["fields"]["id"]["inputFields"] == [
        {"namespace": "hive://ms:9083", "name": "db.orders", "field": "id",
         "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]},
        {"namespace": "https://catalog:443/api", "name": "sales.people", "field": "id",
         "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]},
    ]  # fmt: skip
    assert facet["fields"]["total"]["inputFields"][0]["transformations"][0]["subtype"] == "AGGREGATION"
    before = lineage(namespace="hive://ms:9083", sql="SELECT 1", target="db.t", details=None, complete=False)
    assert "columnLineage" not in before.outputs[0].facets, "only the driver's plan knows it"


def test_each_error_family_raises_its_own_airflow_exception_for_retry_policies():
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

    from airflow_provider_ctas.core.errors import (
        DatabaseNotFoundError,
        PublishError,
        QueryFailedError,
        SparkJobError,
    )
    from airflow_provider_ctas.operators import exceptions
    from airflow_provider_ctas.operators.exceptions import airflow_exception

    race = airflow_exception(PublishError("created by a concurrent run"))
    assert type(race) is exceptions.CtasPublishFailed and isinstance(race, AirflowException)
    assert not isinstance(race, AirflowFailException) and str(race).startswith("[PUBLISH_FAILED] ")
    assert type(airflow_exception(SparkJobError("lost executor"))) is exceptions.CtasSparkFailed
    failed = airflow_exception(QueryFailedError("DIVIDE_BY_ZERO"))
    assert type(failed) is exceptions.CtasQueryFailed and isinstance(failed, AirflowFailException)
    other = airflow_exception(DatabaseNotFoundError("no db"))
    assert type(other) is exceptions.AtomicCtasFailure and other.code == "DATABASE_NOT_FOUND"
    # What a DAG author writes: retry a lost create race quickly, anything else as configured.
    lost_race = "airflow_provider_ctas.operators.exceptions.CtasPublishFailed"
    policy = ExceptionRetryPolicy(rules=[RetryRule(exception=lost_race, action=RetryAction.RETRY)])
    assert policy.evaluate(race, 1, 3).action is RetryAction.RETRY
    assert policy.evaluate(airflow_exception(SparkJobError("x")), 1, 3).action is RetryAction.DEFAULT


def test_mode_connection_and_submit_options_render_from_templates(tmp_path):
    import jinja2

    from airflow_provider_ctas.operators.arguments import rendered_submit_options

    (tmp_path / "daily.hql").write_text("SELECT '{{ params.day }}' AS day")
    op = make(
        sql="daily.hql",
        mode="{{ params.mode }}",
        conn_id="{{ params.conn }}",
        spark_submit_options={"driver_memory": "{{ params.memory }}"},
        conf={"spark.sql.shuffle.partitions": "{{ params.partitions }}"},
    )
    params = {"mode": "replace", "conn": "spark_cluster", "memory": "2g", "partitions": "8", "day": "2024-01-01"}
    op.render_template_fields({"params": params}, jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path)))
    assert (op.sql, op.mode, op.conn_id) == ("SELECT '2024-01-01' AS day", "replace", "spark_cluster")
    assert op.spark_submit_options == {"driver_memory": "2g"}
    assert op.conf == {"spark.sql.shuffle.partitions": "8"}
    with pytest.raises(InvalidInputError, match="must render to a dict"):
        rendered_submit_options("{'driver_memory': '2g'}")
    with pytest.raises(InvalidInputError, match="unsupported keys"):
        make(spark_submit_options={"application": "{{ params.evil }}"})


@pytest.mark.parametrize(
    ("sql", "found"),
    [("DROP TABLE x", "'DROP'"), ("  -- a comment\n insert into t select 1", "'INSERT'"), ("", "sql is empty")],
)
def test_sql_that_is_not_one_query_is_refused_when_the_dag_is_parsed(sql, found):
    with pytest.raises(InvalidInputError, match=found):
        make(sql=sql)


def test_queries_of_every_shape_and_templated_properties_pass_parsing():
    shapes = ("select 1", "/* c */ WITH a AS (SELECT 1) SELECT * FROM a", "VALUES (1)", "(SELECT 1)", "FROM t SELECT *")
    for sql in shapes:
        make(sql=sql)
    make(sql="queries/{{ params.name }}.sql")  # rendered, then checked in begin
    make(table_properties={"{{ params.key }}": "v"})  # a templated key is checked once rendered


def test_stale_submission_folders_of_killed_tries_are_swept(tmp_path, monkeypatch):
    import os
    import tempfile

    from airflow_provider_ctas.runners.spark_submit import STALE_WORKDIR_SECONDS, sweep_stale_workdirs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old, fresh = tmp_path / "airflow-ctas-old", tmp_path / "airflow-ctas-new"
    other = tmp_path / "not-ours"
    for folder in (old, fresh, other):
        folder.mkdir()
        (folder / "request.json").write_text("{}")
    long_ago = os.stat(fresh).st_mtime - STALE_WORKDIR_SECONDS - 60
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    assert sweep_stale_workdirs() == [str(old)]
    assert not old.exists() and fresh.exists() and other.exists()


class _Store:
    def __init__(self, value: Any = None, refuse: bool = False) -> None:
        self.value, self.refuse = value, refuse

    def get(self, key: str) -> Any:
        if self.refuse:
            raise RuntimeError("this try's task instance id is retired")
        return self.value

    def set(self, key: str, value: Any) -> None:
        if self.refuse:
            raise RuntimeError("this try's task instance id is retired")
        self.value = value


class _Ti:
    task_id, map_index = "t", -1

    def __init__(self, xcom: Any = None) -> None:
        self.xcom = xcom

    def xcom_pull(self, **kwargs: Any) -> Any:
        return self.xcom

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom = value


def _try(number: int):
    table = create_two_phase_table(
        key=TransactionKey("d", "t", "r"), conn_id="spark_default", target="db.t", mode="create", table_format="parquet"
    )
    table.begin(number, "2024-01-01T00:00:00+00:00")
    return table


@pytest.mark.parametrize("refuse", [False, True])
def test_a_superseded_try_writes_neither_xcom_nor_state_nor_a_link(refuse):
    """Issue 44: try 1 resumed after try 2 published must not overwrite what try 2 recorded, also when
    the state store refuses the superseded try (then XCom, holding try 2, says so)."""
    from airflow_provider_ctas.operators.links import SparkApplicationLink, SupersededTryError
    from airflow_provider_ctas.operators.state import persist

    newer = _try(2).to_dict()
    store, ti = _Store(None if refuse else newer, refuse=refuse), _Ti(newer)
    op = make()
    op._txn = _try(1)
    context: Any = {"ti": ti, "task_state_store": store}
    op._persist(context, op._txn)
    assert ti.xcom == newer and (refuse or store.value == newer)
    with pytest.raises(SupersededTryError):
        SparkApplicationLink().get_link(op, ti_key=None)

    fresh_store, fresh_ti = _Store(), _Ti()  # a try that is the newest records in both
    fresh_context: Any = {"ti": fresh_ti, "task_state_store": fresh_store}
    assert persist(fresh_context, _try(3), op.log)
    assert fresh_ti.xcom["try_number"] == 3 and fresh_store.value["try_number"] == 3


def test_the_history_says_when_the_write_finished_not_when_the_task_heard():
    from airflow_provider_ctas.core.protocol import PhaseResult, Reached
    from airflow_provider_ctas.operators.state import apply_result

    op, table = make(), _try(1)
    result = PhaseResult(ok=True, reached=Reached.COMMITTED, details={"prepared_at": "2024-01-01T00:00:05+00:00"})
    apply_result(table, result, "2024-01-01T00:01:00+00:00", op.log)
    prepared = [entry for entry in table.history if entry.state.value == "prepared"]
    assert [entry.at for entry in prepared] == ["2024-01-01T00:00:05+00:00"]
    assert table.history[-1].state.value == "committed" and table.history[-1].at != prepared[0].at


def test_a_publish_says_how_it_changed_the_table_and_which_version_it_made():
    from airflow_provider_ctas.operators.lineage import lineage

    def facets(outcome: str | None, complete: bool = True, fmt: str = "parquet", **details: Any) -> dict[str, Any]:
        done = lineage(namespace="hive://ms:9083", sql="SELECT 1", target="db.t", details=details,
                       complete=complete, table_format=fmt, outcome=outcome)  # fmt: skip
        return dict(done.outputs[0].facets)

    created = facets("published", location="s3a://lake/db/t", publish={"mechanism": "rename"})
    assert created["lifecycleStateChange"].lifecycleStateChange.value == "CREATE"
    (link,) = created["symlinks"].identifiers
    assert (link.namespace, link.name, link.type) == ("s3://lake", "db/t", "LOCATION")
    assert "storage" not in created and "version" not in created, "a file-format table has neither"

    replaced = facets("published", fmt="iceberg", snapshot_id=42, publish={"mechanism": "branch"})
    assert replaced["lifecycleStateChange"].lifecycleStateChange.value == "OVERWRITE"
    assert (replaced["version"].datasetVersion, replaced["storage"].storageLayer) == ("42", "iceberg")
    delta = facets("published", fmt="delta", delta_version=3, publish={"mechanism": "delta_commit"})
    assert delta["version"].datasetVersion == "3"

    # Only a publish changes the table: a retry that found it published, and a run still going, do not.
    for outcome, complete in [("already_published", True), ("published", False), (None, True)]:
        quiet = facets(outcome, complete, fmt="delta", delta_version=3, publish={"mechanism": "delta_commit"})
        assert "lifecycleStateChange" not in quiet and "version" not in quiet, outcome
        assert quiet["storage"].storageLayer == "delta"
