"""The Iceberg strategy on real Iceberg (the 1.11 runtime from Maven Central) in a Hive-metastore
catalog on this session's metastore service, through the real operator, its driver on Spark 4.1
(the newest Spark that runtime supports). An independent reader (its own Spark 4.1 JVM with the
runtime, ``tests/support/iceberg.py``) checks the tables.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_ctas.catalogs.iceberg.fence import FENCE_PREFIX, LEGACY_BEGUN_PREFIX
from airflow_provider_ctas.catalogs.iceberg.metadata import SPARK_CATALOG_CLASS, IcebergCatalog
from airflow_provider_ctas.catalogs.iceberg.rebase import REBASED_FROM
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import InvalidInputError, UnsupportedTargetError
from airflow_provider_ctas.core.transaction import TransactionKey
from tests.support.catalog import database_dir
from tests.support.dags import DAGS_FOLDER, make_dag, xcom_value
from tests.support.faults import (
    Trial,
    check_observations,
    older_try_resumed_beside_newer,
    summarize,
    wait_for_drivers_to_exit,
)
from tests.support.format_scenarios import (
    FormatProbe,
    kill_mid_write_then_after_publish,
    kill_task_at,
    one_winner,
    race_two_creators,
    record_format_cell,
)
from tests.support.gc import entries, gc_cli
from tests.support.iceberg import (
    CATALOG,
    SPARK_FOR_ICEBERG,
    IcebergReader,
    iceberg_conf,
    iceberg_ctas,
    task_conf_on_spark41,
)
from tests.support.processes import wait_for_line
from tests.support.table_reader import TablePoller

# One test worker runs the whole module: its module-scoped services start once, not on every worker.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.formats, pytest.mark.xdist_group("iceberg")]

TRY_SQL = "SELECT id, CAST({{ ti.try_number }} AS BIGINT) AS written_by_try FROM range(100)"


@pytest.fixture(scope="module")
def reader(metastore, tmp_path_factory) -> Iterator[IcebergReader]:
    session = IcebergReader(metastore, tmp_path_factory.mktemp("iceberg") / "reader.log")
    yield session
    session.close()


_ctas = iceberg_ctas


@pytest.fixture
def on_spark41(monkeypatch, metastore) -> dict[str, str]:
    return task_conf_on_spark41(monkeypatch, iceberg_conf(metastore))


def _leftovers(reader: IcebergReader, database: str, table: str) -> list[str]:
    """Staging tables in the namespace, branches other than main and fences on the table."""
    staging = [r[1] for r in reader.rows(f"SHOW TABLES IN {CATALOG}.{database}") if r[1].startswith("__ctas_")]
    branches = [b for b in reader.branches(table) if b != "main"] if reader.exists(table) else []
    props = reader.properties(table) if reader.exists(table) else {}
    fences = [k for k in props if k.startswith((FENCE_PREFIX, LEGACY_BEGUN_PREFIX))]
    return staging + branches + fences


def _reserved_directories(spark: Any, database: str) -> list[str]:
    """Directories under reserved names in the namespace's location (a renamed-in table keeps its
    staging directory; the Hive catalog moves no files)."""
    return sorted(p.name for p in database_dir(spark, database).glob("__ctas_*"))


def test_iceberg_lifecycle(stack, spark, reader, on_spark41, database):
    target = f"{CATALOG}.{database}.events"

    state, txn = _ctas("ice_create", on_spark41, target_table=target, sql="SELECT id, id % 7 AS k FROM range(700)",
                       checks=[{"type": "unique", "columns": ["id"]}], comment="events",
                       column_comments={"id": "event id"})  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "rename"
    assert [(c["name"], c["passed"]) for c in txn["details"]["checks"]] == [("unique(id)", True)], "staging audited"
    assert txn["details"]["spark_application"]["version"] == SPARK_FOR_ICEBERG
    assert txn["details"]["metastore_uris"] == stack.uri, "lineage names the Iceberg catalog's metastore"
    assert reader.value(f"SELECT count(*) FROM {target}") == 700
    created_txn = TransactionKey("ice_create", "ctas", txn["key"]["run_id"]).txn_id
    created = reader.properties(target)
    assert created[markers.TXN_ID] == created_txn and created[markers.ROW_COUNT] == "700"
    assert markers.PUBLISHED_AT in created, "stamped on staging before the rename"
    assert created[markers.CHECKS] == "1/1 passed: unique(id)=0"
    assert reader.current_summary(target)[markers.DAG_ID] == "ice_create", "provenance on the snapshot"
    assert reader.comments(target) == ("events", {"id": "event id"}), "the table's and the column's doc"
    reader.rows(f"ALTER TABLE {target} ALTER COLUMN k COMMENT 'bucket'")  # documented by hand

    # Same-shape replace: staged on a branch, main moved in one metadata swap.
    first_snapshot = reader.value(f"SELECT snapshot_id FROM {target}.refs WHERE name = 'main'")
    # Checks that fail on the branch: main keeps its version, the branch and fence go. The range's
    # guard stops the branch's write (which commits nothing); the write again counts what fails.
    state, txn = _ctas("ice_audit_fails", on_spark41, target_table=target, mode="replace",
                       sql="SELECT id, id % 3 AS k FROM range(50)", comment="never published",
                       checks=[{"type": "row_count_change", "min_ratio": 0.5},
                               {"type": "value_range", "column": "k", "max": 1}])  # fmt: skip
    assert state == "failed" and txn["details"]["error"]["code"] == "AUDIT_FAILED", txn
    assert [(c["passed"], c["value"], c["note"]) for c in txn["details"]["checks"]] == [
        (False, round(50 / 700, 4), "50 rows now, 700 published; measured by the write"),
        (False, 16, "measured by the write"),
    ]
    assert reader.value(f"SELECT count(*) FROM {target}") == 700
    assert reader.comments(target) == ("events", {"id": "event id", "k": "bucket"}), "a failed try changes none"
    assert _leftovers(reader, database, target) == []

    checks = [{"type": "row_count", "min": 50, "max": 50}, {"type": "not_null", "columns": ["k"]}]
    state, txn = _ctas("ice_replace", on_spark41, target_table=target, mode="replace",
                       sql="SELECT id, id % 3 AS k FROM range(50)", checks=checks,
                       column_comments={"id": "the event"})  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "branch"
    assert reader.comments(target) == ("events", {"id": "the event", "k": "bucket"}), (
        "kept where not given, changed where given, in the publishing swap"
    )
    assert [(c["passed"], c["note"]) for c in txn["details"]["checks"]] == [(True, "measured by the write")] * 2, (
        "the branch audited, by the write's observed metrics"
    )
    assert [p["phase"] for p in txn["details"]["phases"]] == ["begin", "prepare", "audit", "commit"]
    assert reader.value(f"SELECT count(*) FROM {target}") == 50
    summary = reader.current_summary(target)
    assert summary[markers.DAG_ID] == "ice_replace" and summary[markers.TRY_NUMBER] == "1"
    replaced = reader.properties(target)
    assert replaced[markers.DAG_ID] == "ice_replace" and replaced[markers.ROW_COUNT] == "50"
    assert replaced[markers.CHECKS].startswith("2/2 passed"), "the checks recorded in the publishing swap"
    assert reader.value(f"SELECT count(*) FROM {target} VERSION AS OF {first_snapshot}") == 700, (
        "the replaced version stays readable as a snapshot"
    )
    assert _leftovers(reader, database, target) == []

    # A query that fails mid-write: the target keeps its version, nothing is left.
    failing = "SELECT id, CAST(IF(id = 7, raise_error('boom'), id % 3) AS BIGINT) AS k FROM range(40)"
    state, txn = _ctas("ice_failed", on_spark41, target_table=target, mode="replace", sql=failing)
    assert state == "failed" and txn["details"]["error"]["code"] == "QUERY_FAILED"
    assert reader.value(f"SELECT count(*) FROM {target}") == 50
    assert _leftovers(reader, database, target) == []

    state, txn = _ctas("ice_keep", on_spark41, target_table=target, mode="create_if_not_exists",
                       sql="SELECT 1 AS id, 1 AS k")  # fmt: skip
    assert state == "success" and txn["outcome"] == "target_exists"
    assert reader.value(f"SELECT count(*) FROM {target}") == 50

    # The name is taken by a table that is not an Iceberg table (same metastore): left untouched.
    spark.sql(f"CREATE TABLE {database}.hive_owned USING parquet AS SELECT 7 AS id")
    state, txn = _ctas("ice_taken", on_spark41, target_table=f"{CATALOG}.{database}.hive_owned", sql="SELECT 1 AS id")
    assert state == "failed" and txn["details"]["error"]["code"] == "TARGET_EXISTS"
    assert "is not an Iceberg table" in txn["details"]["error"]["message"]
    assert [r.id for r in spark.table(f"{database}.hive_owned").collect()] == [7]
    assert _leftovers(reader, database, target) == []

    # A replace that changes the columns and the partitioning, as CREATE OR REPLACE TABLE AS SELECT does.
    before = reader.value(f"SELECT snapshot_id FROM {target}.refs WHERE name = 'main'")
    reshaped = (
        "SELECT CAST(id AS STRING) AS id, TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, "
        "CAST(id AS INT)) AS ts, CAST(k AS STRING) AS k FROM range(5) AS r(id) JOIN (SELECT 1 AS k)"
    )
    state, txn = _ctas("ice_reshape", on_spark41, target_table=target, mode="replace", sql=reshaped,
                       partition_by=["days(ts)", "bucket(4, id)"],
                       checks=[{"type": "row_count", "min": 5}])  # fmt: skip
    assert state == "success", txn
    assert txn["details"]["publish"]["mechanism"] == "reshape"
    assert reader.rows(f"SELECT typeof(id), typeof(ts), typeof(k), count(*) FROM {target} GROUP BY 1, 2, 3") == [
        ["string", "timestamp", "string", 5]
    ]
    described = [r for r in reader.rows(f"DESCRIBE TABLE {target}") if str(r[0]).startswith("Part ")]
    assert [r[1] for r in described] == ["days(ts)", "bucket(4, id)"]
    assert reader.value(f"SELECT count(*) FROM {target}.partitions") == 5
    assert reader.rows(f"SELECT typeof(id), count(*) FROM {target} VERSION AS OF {before} GROUP BY 1") == [
        ["bigint", 50]
    ], "the replaced version stays readable, in its own schema"
    assert reader.comments(target) == ("events", {"id": "the event", "k": "bucket"}), "docs kept by column name"
    assert reader.properties(target)[markers.DAG_ID] == "ice_reshape"
    assert reader.current_summary(target)[markers.DAG_ID] == "ice_reshape"
    old_file = str(reader.value(f"SELECT file_path FROM {target}.files VERSION AS OF {before} LIMIT 1"))
    data_dir = old_file.rsplit("/", 1)[0]
    files = [r[0] for r in reader.rows(f"SELECT file_path FROM {target}.files")]
    assert files and all(f.startswith(data_dir + "/") for f in files), ("in the target's data directory", files)
    reshape_txn = TransactionKey("ice_reshape", "ctas", txn["key"]["run_id"]).txn_id
    assert markers.staging_name(reshape_txn, 1) not in _reserved_directories(spark, database), "staging removed"
    assert _leftovers(reader, database, target) == []
    reader.rows(f"INSERT INTO {target} VALUES ('x', TIMESTAMP'2024-02-01 00:00:00', 'y')")
    assert reader.value(f"SELECT count(*) FROM {target}") == 6, "a plain writer writes the new shape"


@pytest.mark.parametrize(
    ("conf", "error", "message"),
    [
        ({}, InvalidInputError, "catalog 'lake' is not configured; set in the operator's conf: "
         "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog"),
        ({"": "org.example.OtherCatalog"}, UnsupportedTargetError, "the Iceberg strategy serves"),
        ({"": SPARK_CATALOG_CLASS, ".type": "hadoop"}, UnsupportedTargetError, "is type='hadoop'; the Iceberg"),
        ({"": SPARK_CATALOG_CLASS, ".type": "rest"}, InvalidInputError, "a REST catalog without a URL; set spark.sql"),
        ({"": SPARK_CATALOG_CLASS, ".type": "hive"}, InvalidInputError,
         "the Iceberg runtime is not on the driver's classpath"),
    ],
)  # fmt: skip
def test_catalog_problems_are_refused_with_the_fix_before_any_spark_work(spark, conf, error, message):
    """What begin checks first, in a real driver session: this test process's Spark 4.3, which has no
    Iceberg runtime on its classpath."""
    keys = [f"spark.sql.catalog.lake{suffix}" for suffix in conf]
    try:
        for key, value in zip(keys, conf.values(), strict=True):
            spark.conf.set(key, value)
        with pytest.raises(error, match=re.escape(message)):
            IcebergCatalog(spark, "lake")
    finally:
        for key in keys:
            spark.conf.unset(key)


def test_plain_rtas_lets_a_zombie_win_and_the_operator_does_not(stack, reader, on_spark41, database, tmp_path):
    """Iceberg's REPLACE TABLE commit is last-committer-wins: a writer that started first and
    commits last puts back its (older) result over a newer one. Then the same scenario through the
    operator: try 1 is a zombie (its task still answers commit), try 2 takes over and publishes."""
    plain = f"{CATALOG}.{database}.plain"
    reader.rows(f"CREATE TABLE {plain} USING iceberg AS SELECT id, 'first' AS v, '' AS pause FROM range(3)")
    # One partition (one of the reader's two cores) for 20 s: the newer writer runs beside it.
    slow = "reflect('java.lang.Thread', 'sleep', CAST(1000 AS BIGINT))"
    assert "started" in reader.request(
        background="zombie",
        sql=f"CREATE OR REPLACE TABLE {plain} USING iceberg AS SELECT id, 'zombie' AS v, {slow} AS pause "
        "FROM range(0, 20, 1, 1)",
    )
    time.sleep(5)  # the zombie's replace transaction has begun; its job is running
    reader.rows(
        f"CREATE OR REPLACE TABLE {plain} USING iceberg AS SELECT id, 'newer' AS v, '' AS pause FROM range(0, 5, 1, 1)"
    )
    assert reader.rows(f"SELECT DISTINCT v FROM {plain}") == [["newer"]]
    assert reader.request(running="zombie")["running"], "the newer replace committed while the zombie ran"
    assert "rows" in reader.request(wait="zombie")
    assert reader.rows(f"SELECT DISTINCT v FROM {plain}") == [["zombie"]], "plain RTAS: the zombie overwrote"

    target = f"{CATALOG}.{database}.fenced"
    reader.rows(f"CREATE TABLE {target} USING iceberg AS SELECT id, CAST(0 AS BIGINT) AS written_by_try FROM range(5)")
    dag_id = "ice_zombie"
    make_dag(dag_id, retries=3, target_table=target, mode="replace", sql=TRY_SQL, table_format="iceberg",
             conf=on_spark41)  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "after_prepare": {"wait_for": str(release), "only_try": 1}}
    started = time.monotonic()
    with TablePoller(reader, target) as poller:
        first = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / "try1.log", faults).start()
        wait_for_line(progress, "after_prepare try=1", timeout=240)
        second = Trial(DAGS_FOLDER / f"{dag_id}.py", dag_id, "zombie_run", tmp_path / "try2.log").start().wait()
        release.touch()
        wait_for_line(progress, "result phases=begin,prepare,commit ok=False FENCED", timeout=120)
        first.wait()
        wait_for_drivers_to_exit(target)
    left = _leftovers(reader, database, target)
    problem = check_observations(poller.seen, {"5:0", "100:2"}, "100:2")
    record_format_cell(
        _probe(reader, database, target),
        "zombie",
        "try 1 a zombie (its task still answers "
        "commit); try 2 takes over and publishes, then try 1 reaches its publish",
        "replace",
        f"try 1: {first.wait()} (FENCED); try 2: {second}",
        left,
        poller.seen,
        problem,
        started,
    )
    assert second == "success"
    assert "commit: the task decided commit for try 1" in (tmp_path / "try1.log").read_text(errors="replace")
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert reader.value(f"SELECT count(*) FROM {target}") == 100
    assert reader.current_summary(target)[markers.TRY_NUMBER] == "2"
    stored = xcom_value(dag_id, "zombie_run", "ctas_transaction")
    assert (stored["try_number"], stored["state"]) == (2, "committed"), "the FENCED try 1 wrote no XCom over try 2's"
    assert left == []
    assert problem is None, summarize(poller.seen)


def _probe(reader: IcebergReader, database: str, target: str) -> FormatProbe:
    return FormatProbe(
        "iceberg",
        reader,
        leftovers=lambda: _leftovers(reader, database, target),
        versions=lambda table: int(reader.value(f"SELECT count(*) FROM {table}.snapshots")),
    )


# overwrite_partitions publishes through the same audit branch as replace (its abort drops the branch,
# its retry finds the markers of the snapshot it committed), so replace's cell proves it; its own
# retry-after-another-date case is test_a_retry_finds_its_landed_partitions_after_another_date_published.
@pytest.mark.parametrize("mode", ["create", "replace"])
def test_killed_tries_leave_nothing_and_a_retry_after_a_landed_commit_writes_nothing(
    stack, spark, reader, on_spark41, database, tmp_path, mode
):
    """Try 1's driver is SIGKILLed mid-write: nothing published. Try 2's task process is SIGKILLed
    right after its publish: try 3 reports already_published and commits no new snapshot."""
    target = f"{CATALOG}.{database}.killed_{mode}"
    if mode != "create":
        partitioned = ("PARTITIONED BY (part)", ", 'p' AS part") if mode == "overwrite_partitions" else ("", "")
        reader.rows(
            f"CREATE TABLE {target} USING iceberg {partitioned[0]} AS SELECT id, CAST(0 AS BIGINT) AS written_by_try, "
            f"CAST(NULL AS STRING) AS pause{partitioned[1]} FROM range(5)"
        )
    result = kill_mid_write_then_after_publish(_probe(reader, database, target), target, mode, on_spark41, tmp_path)
    assert result["try1"] != "success" and result["left1"] == []
    assert result["published_before"] is (mode != "create")
    assert "already published by try 2" in (tmp_path / "try3.log").read_text(errors="replace")
    assert result["try3"] == "success" and result["new_versions"] == 0, "the retry wrote nothing"
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert reader.value(f"SELECT count(*) FROM {target}") == 200
    assert result["left"] == []
    assert result["problem"] is None, summarize(result["seen"])
    if mode == "create":
        # Try 1's staging table went with its directory, uncommitted data files included; try 2's
        # is the published table's.
        txn = TransactionKey("iceberg_kill_create", "ctas", "kill_create").txn_id
        assert _reserved_directories(spark, database) == [markers.staging_name(txn, 2)]


def test_two_creators_race_and_exactly_one_publishes(stack, reader, on_spark41, database, tmp_path):
    """Two task instances create the same Iceberg table; both reach their publish at once."""
    target = f"{CATALOG}.{database}.raced"
    probe = _probe(reader, database, target)
    winner, error = one_winner(probe, race_two_creators(probe, target, on_spark41, tmp_path))
    assert reader.rows(f"SELECT DISTINCT writer FROM {target}") == [[winner]]
    assert reader.value(f"SELECT count(*) FROM {target}") == winner * 100
    assert error["code"] == "TARGET_EXISTS" and "created by another writer" in error["message"]
    assert _leftovers(reader, database, target) == []


def test_gc_removes_what_a_killed_try_left_and_nothing_else(stack, spark, reader, on_spark41, database, tmp_path):
    """A try killed with its task (no abort run, no retry) leaves its branch, fence and begin record;
    GC keeps them while younger than min_age, then removes them in one swap. A staging table with
    its markers goes; a table under a reserved name without them, main and others' properties stay."""
    target = f"{CATALOG}.{database}.gc_events"
    reader.rows(f"CREATE TABLE {target} TBLPROPERTIES ('owner_note'='kept') AS SELECT id FROM range(30)")
    make_dag("ice_gc_killed", target_table=target, mode="replace", sql="SELECT id FROM range(5)",
             table_format="iceberg", conf=on_spark41)  # fmt: skip
    kill_task_at("ice_gc_killed", "gc_killed", "after_prepare", target, tmp_path)
    left = _leftovers(reader, database, target)
    assert len(left) == 2 and any(name.startswith("ctas_") for name in left), left

    old = "2020-01-01T00:00:00+00:00"
    orphan_txn = "0123456789abcdef" * 2
    orphan = f"{CATALOG}.{database}.{markers.staging_name(orphan_txn, 2)}"
    reader.rows(
        f"CREATE TABLE {orphan} (id BIGINT) USING iceberg TBLPROPERTIES ('{markers.TXN_ID}'='{orphan_txn}', "
        f"'{markers.TRY_NUMBER}'='2', '{markers.CREATED_AT}'='{old}')"
    )
    unmarked = f"{CATALOG}.{database}.{markers.staging_name('f' * 32, 1)}"
    reader.rows(f"CREATE TABLE {unmarked} (id BIGINT) USING iceberg")
    conf = [arg for key, value in on_spark41.items() for arg in ("--conf", f"{key}={value}")]

    first = gc_cli("--catalog", CATALOG, "--database", database, "--min-age", "1h", *conf)
    assert orphan in entries(first, "removed"), first
    kept = entries(first, "kept")
    assert any(what.startswith(target) and "younger than min_age" in why for what, why in kept.items()), kept
    assert kept[unmarked] == "reserved name without this provider's markers"
    unmarked_name = unmarked.rsplit(".", 1)[-1]
    assert sorted(_leftovers(reader, database, target)) == sorted([*left, unmarked_name]), "a young try's stay"

    second = gc_cli("--catalog", CATALOG, "--database", database, "--min-age", "0s", *conf)
    removed = entries(second, "removed")
    assert [what for what in removed if what.startswith(target)], second
    assert _leftovers(reader, database, target) == [unmarked_name], "only the table without markers stays"
    assert reader.value(f"SELECT count(*) FROM {target}") == 30
    assert reader.properties(target)["owner_note"] == "kept"
    assert not reader.exists(orphan)
    assert _reserved_directories(spark, database) == [unmarked_name], "the orphan's directory went with it"


def _per_partition(reader: IcebergReader, target: str, column: str) -> list[list[Any]]:
    return reader.rows(f"SELECT {column}, count(*) FROM {target} GROUP BY {column} ORDER BY {column}")


def test_overwrite_partitions_switches_only_the_partitions_written(stack, reader, on_spark41, database):
    target = f"{CATALOG}.{database}.daily"
    parts = {"mode": "overwrite_partitions", "partition_by": ["ds"]}
    state, txn = _ctas("ice_parts_1", on_spark41, target_table=target, **parts,
                       sql="SELECT id, IF(id < 30, 'a', 'b') AS ds FROM range(50)")  # fmt: skip
    assert state == "success" and txn["details"]["publish"]["mechanism"] == "rename", txn
    assert reader.rows(f"SELECT partition.ds FROM {target}.partitions ORDER BY 1") == [["a"], ["b"]]
    before = reader.value(f"SELECT snapshot_id FROM {target}.refs WHERE name = 'main'")

    # Replaces b (20 rows -> 5) and adds c; a stays. The staged checks see only the 10 rows written.
    checks = [
        {"type": "row_count", "min": 10, "max": 10},
        {"type": "row_count_change", "min_ratio": 0.4, "name": "per partition"},
        {"type": "row_count", "min": 40, "max": 40, "scope": "result", "name": "table rows"},
    ]
    sql = "SELECT id, IF(id < 5, 'b', 'c') AS ds FROM range(10)"
    state, txn = _ctas("ice_parts_2", on_spark41, target_table=target, **parts, sql=sql, checks=checks)
    assert state == "success", txn
    assert [(c["name"], c["value"]) for c in txn["details"]["checks"]] == [
        ("row_count", 10), ("per partition", 0.5), ("table rows", 40)
    ]  # fmt: skip
    assert txn["details"]["publish"]["mechanism"] == "branch"
    assert txn["details"]["publish"]["partitions"] == ["ds=b", "ds=c"]
    assert _per_partition(reader, target, "ds") == [["a", 30], ["b", 5], ["c", 5]]
    assert reader.current_summary(target)[markers.DAG_ID] == "ice_parts_2"
    assert reader.value(f"SELECT count(*) FROM {target} VERSION AS OF {before}") == 50, "the old version stays"
    assert _leftovers(reader, database, target) == []

    # A failed check publishes nothing.
    shrink = [{"type": "row_count_change", "min_ratio": 0.5}]
    state, txn = _ctas("ice_parts_3", on_spark41, target_table=target, **parts, checks=shrink,
                       sql="SELECT id, 'a' AS ds FROM range(3)")  # fmt: skip
    assert state == "failed" and txn["details"]["error"]["code"] == "AUDIT_FAILED", txn
    assert _per_partition(reader, target, "ds") == [["a", 30], ["b", 5], ["c", 5]]
    assert _leftovers(reader, database, target) == []

    # Partitions named other than the table's are refused before any data is written.
    state, txn = _ctas("ice_parts_4", on_spark41, target_table=target, mode="overwrite_partitions",
                       partition_by=["id"], sql="SELECT id, 'a' AS ds FROM range(3)")  # fmt: skip
    assert state == "failed" and txn["details"]["error"]["code"] == "UNSUPPORTED_TARGET", txn
    assert "keep the table's partitioning" in txn["details"]["error"]["message"]
    assert _leftovers(reader, database, target) == []


def test_backfill_dates_race_to_create_and_to_publish_and_all_land(stack, reader, on_spark41, database, tmp_path):
    """Two task instances overwrite their own partition of a missing table, both at their publish at
    once: one creates the table, the other writes into it. Then again on the existing table: the
    second to publish finds main moved and re-applies its partition on it, without a retry."""
    target = f"{CATALOG}.{database}.first_use"
    probe = _probe(reader, database, target)
    race: dict[str, Any] = {"mode": "overwrite_partitions", "partition_by": ["writer"]}
    (tmp_path / "created").mkdir()
    (tmp_path / "moved").mkdir()
    states = race_two_creators(probe, target, on_spark41, tmp_path / "created", name="first_use", **race)
    assert states == {1: "success", 2: "success"}
    assert _per_partition(reader, target, "writer") == [[1, 100], [2, 200]]
    assert _leftovers(reader, database, target) == []

    reader.rows(f"INSERT INTO {target} SELECT id, 9 AS writer FROM range(7)")
    states = race_two_creators(probe, target, on_spark41, tmp_path / "moved", name="moved", **race)
    assert states == {1: "success", 2: "success"}
    assert _per_partition(reader, target, "writer") == [[1, 100], [2, 200], [9, 7]], "overwritten, not appended"
    summaries = [dict(r[0]) for r in reader.rows(f"SELECT summary FROM {target}.snapshots")]
    assert sum(REBASED_FROM in s for s in summaries) == 1, "the second publisher re-applied its partition"
    assert _leftovers(reader, database, target) == []


def test_a_concurrent_write_to_the_same_partition_is_not_overwritten(stack, reader, on_spark41, database, tmp_path):
    """Another writer changes the partition a try overwrites between its write and its publish: the
    try publishes nothing (no lost update) and leaves nothing."""
    target = f"{CATALOG}.{database}.contested"
    reader.rows(f"CREATE TABLE {target} USING iceberg PARTITIONED BY (ds) AS SELECT id, 'a' AS ds FROM range(4)")
    make_dag("ice_contested", target_table=target, mode="overwrite_partitions", partition_by=["ds"],
             sql="SELECT id, 'a' AS ds FROM range(50)", table_format="iceberg", conf=on_spark41)  # fmt: skip
    progress, release = tmp_path / "progress", tmp_path / "release"
    faults = {"progress_file": str(progress), "before_publish": {"wait_for": str(release)}}
    trial = Trial(DAGS_FOLDER / "ice_contested.py", "ice_contested", "contested", tmp_path / "try1.log", faults)
    trial.start()
    wait_for_line(progress, "before_publish try=1", timeout=240)
    reader.rows(f"INSERT INTO {target} SELECT id, 'a' AS ds FROM range(100, 103)")
    release.touch()
    assert trial.wait() == "failed"
    error = xcom_value("ice_contested", "contested", "ctas_transaction")["details"]["error"]
    assert error["code"] == "PUBLISH_FAILED" and "changed the partitions this try overwrites" in error["message"]
    assert reader.value(f"SELECT count(*) FROM {target}") == 7, "the other writer's rows stay"
    assert _leftovers(reader, database, target) == []


def test_a_create_try_held_inside_its_begin_is_fenced_by_the_next_try_s_staging(
    stack, reader, on_spark41, database, tmp_path
):
    """Try 1 of a create is held inside its begin, before it created its staging table, while its
    task instance is cleared; try 2 begins (nothing of try 1's to drop), stages and is held before
    its publish; try 1, resumed, creates and writes its staging, finds try 2's right before its
    rename and publishes nothing. Then try 2 publishes."""
    target, dag_id = f"{CATALOG}.{database}.held_create", "ice_held_create"
    make_dag(dag_id, retries=2, target_table=target, mode="create", sql=TRY_SQL, table_format="iceberg",
             conf=on_spark41)  # fmt: skip
    tries = older_try_resumed_beside_newer(dag_id, "held", "before_staging", tmp_path)
    wait_for_drivers_to_exit(target)
    assert "after_publish try=1" not in tries.progress, "try 1 published after try 2 began"
    assert tries.first != "success" and "try 1 must not publish" in tries.first_log, tries.first_log[-3000:]
    assert tries.second == "success", (tmp_path / "try2.log").read_text(errors="replace")[-3000:]
    assert reader.rows(f"SELECT DISTINCT written_by_try FROM {target}") == [[2]]
    assert reader.properties(target)[markers.TRY_NUMBER] == "2"
    assert _leftovers(reader, database, target) == []


def test_a_retry_finds_its_landed_partitions_after_another_date_published(
    stack, reader, on_spark41, database, tmp_path
):
    """Try 1's task is SIGKILLed right after its publish; another task instance (the next date)
    then publishes into the same table, so the table's properties name that one. Try 2 still finds
    try 1's snapshot in main's history: already_published, no new snapshot."""
    target = f"{CATALOG}.{database}.landed"
    reader.rows(f"CREATE TABLE {target} USING iceberg PARTITIONED BY (ds) AS SELECT id, 'w' AS ds FROM range(4)")
    parts: dict[str, Any] = {"target_table": target, "mode": "overwrite_partitions", "partition_by": ["ds"]}
    make_dag("ice_landed", retries=2, sql="SELECT id, 'x' AS ds FROM range(10)", conf=on_spark41,
             table_format="iceberg", **parts)  # fmt: skip
    kill_task_at("ice_landed", "landed", "after_publish", target, tmp_path)

    state, _ = _ctas("ice_next_date", on_spark41, sql="SELECT id, 'y' AS ds FROM range(3)", **parts)
    assert state == "success"
    assert reader.properties(target)[markers.DAG_ID] == "ice_next_date"
    snapshots = reader.value(f"SELECT count(*) FROM {target}.snapshots")

    assert (
        Trial(DAGS_FOLDER / "ice_landed.py", "ice_landed", "landed", tmp_path / "try2.log").start().wait() == "success"
    )
    assert "already published by try 1" in (tmp_path / "try2.log").read_text(errors="replace")
    assert reader.value(f"SELECT count(*) FROM {target}.snapshots") == snapshots, "the retry wrote nothing"
    assert _per_partition(reader, target, "ds") == [["w", 4], ["x", 10], ["y", 3]]
    assert _leftovers(reader, database, target) == []
