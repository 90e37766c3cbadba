"""The one-call catalog read gives every decision the same input as the SQL commands it replaces.

Begin, the publish checks, recovery and GC decide on a table's type, location, provider, columns,
partitioning, bucketing and properties. A classic driver reads them with one session-catalog call;
these tests hold that answer against ``DESCRIBE TABLE EXTENDED`` + ``SHOW TBLPROPERTIES`` (the
path Spark Connect and non-file providers still take) on the shared metastore service.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import urlparse

import pytest

from airflow_provider_ctas.catalogs.metastore.catalog import GLUE_CLIENT_FACTORY_SETTING
from airflow_provider_ctas.core.errors import UnsupportedTargetError
from airflow_provider_ctas.core.identifiers import TableRef
from airflow_provider_ctas.spark.catalog_entry import described, described_location, raw_metadata, serves_fully
from airflow_provider_ctas.spark.engine import ClassicEngine
from tests.support.catalog import fresh
from tests.support.phases import executor_for, run_all

pytestmark = pytest.mark.integration


WIDE_STRUCT = ", ".join(f"f{i}: INT" for i in range(30))
FIELDS = ", ".join(f"'f{i}', {i}" for i in range(30))
TABLES = {
    "typed": (
        "CREATE TABLE {t} (id BIGINT, amount DECIMAL(12,3), code CHAR(5), label VARCHAR(10), "
        "tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, at TIMESTAMP_NTZ, s STRUCT<a: INT, `b c`: STRING>, "
        "`Mixed Case` STRING COLLATE UTF8_LCASE, p STRING, q INT) USING parquet PARTITIONED BY (p, q) "
        """TBLPROPERTIES ('airflow_ctas.x'='{{"a": [1, 2]}}', 'k'='v ''quoted''')"""
    ),
    "wide": f"CREATE TABLE {{t}} (w STRUCT<{WIDE_STRUCT}>) USING orc",
    "hive_serde": "CREATE TABLE {t} (id INT, name STRING) STORED AS PARQUET",
    "bucketed": "CREATE TABLE {t} (id INT, v STRING) USING parquet CLUSTERED BY (id) INTO 4 BUCKETS",
    "external": "CREATE TABLE {t} (id INT) USING parquet LOCATION '{location}/elsewhere with space'",
    "view": "CREATE VIEW {t} TBLPROPERTIES ('k'='v') AS SELECT 1 AS one",
    # Options a flip's write repeats; DESCRIBE's own row joins them with the separator's ", ".
    "csv_options": "CREATE TABLE {t} (id INT, s STRING) USING csv OPTIONS (sep ', ', header 'true', quote '\"')",
}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_one_call_reads_what_describe_and_show_tblproperties_show(spark, database, kind, tmp_path):
    ref = TableRef(database, kind)
    spark.sql(TABLES[kind].format(t=ref.quoted, location=tmp_path.as_uri()))
    session = fresh(spark)

    by_sql = described(session, ref, storage=True)
    by_catalog = ClassicEngine(session).table_entry(ref)

    assert by_sql is not None
    # Spark 4's SHOW TBLPROPERTIES also lists a Hive table's storage options as ``option.*``; the
    # decisions read only the table's own properties (the provider's markers among them).
    own = {k: v for k, v in by_sql.properties.items() if not k.startswith("option.")}
    expected = dataclasses.replace(by_sql, properties=own)
    assert by_catalog == expected
    # A flip's re-reads of the location over Spark Connect: DESCRIBE alone, one round trip.
    assert described_location(session, ref) == by_sql.location
    if kind == "csv_options":
        assert by_catalog.storage_options == {"sep": ", ", "header": "true", "quote": '"'}
    if kind == "wide":  # DESCRIBE alone would cut the struct short at 25 fields
        assert by_catalog.columns == [("w", "struct<" + ",".join(f"f{i}:int" for i in range(30)) + ">")]
    # The view has no location and no provider: it takes the SQL path, the others the one call.
    assert serves_fully(raw_metadata(session, ref)) is (kind != "view")


def test_char_and_varchar_keep_their_declared_types(spark, database):
    """A flip compares these with the query's types: ``string`` here would turn a mismatch into a match."""
    ref = TableRef(database, "declared")
    spark.sql(f"CREATE TABLE {ref.quoted} (code CHAR(5), label VARCHAR(10)) USING parquet")
    entry = ClassicEngine(fresh(spark)).table_entry(ref)
    assert entry is not None
    assert entry.columns == [("code", "char(5)"), ("label", "varchar(10)")]


def test_a_same_shape_replace_of_a_wide_struct_table_flips(spark, database):
    """Through the real phases: with DESCRIBE's cut-short type the flip was refused as a change of shape."""
    spark.sql(f"CREATE TABLE {database}.wide USING parquet AS SELECT named_struct({FIELDS}) AS w")
    executor = executor_for(spark, f"{database}.wide", f"SELECT named_struct({FIELDS}) AS w FROM range(3)",
                            mode="replace")  # fmt: skip
    run_all(executor)
    assert executor.published
    assert executor.details["publish"]["mechanism"] == "flip"
    assert fresh(spark).table(f"{database}.wide").count() == 3


def test_a_missing_or_dropped_table_reads_as_missing(spark, database):
    ref = TableRef(database, "gone")
    engine = ClassicEngine(fresh(spark))
    assert engine.table_entry(ref) is None
    assert engine.table_properties(ref) is None
    assert described_location(fresh(spark), ref) is None
    assert engine.table_entry(TableRef(f"{database}_nodb", "gone")) is None
    spark.sql(f"CREATE TABLE {ref.quoted} (id INT) USING parquet TBLPROPERTIES ('k'='v')")
    assert engine.table_properties(ref) == described(fresh(spark), ref).properties  # type: ignore[union-attr]
    assert described_location(fresh(spark), ref) == engine.table_location(ref) is not None
    spark.sql(f"DROP TABLE {ref.quoted}")
    assert engine.table_entry(ref) is None
    assert engine.table_properties(ref) is None
    assert described_location(fresh(spark), ref) is None


def test_one_call_drop_keeps_drop_table_purge_semantics(spark, database, tmp_path):
    """A managed table's data goes with it, an external table's stays, a missing one is no error."""
    managed, external = TableRef(database, "managed"), TableRef(database, "external")
    spark.sql(f"CREATE TABLE {managed.quoted} USING parquet AS SELECT id FROM range(3)")
    data = tmp_path / "external_data"
    spark.sql(f"CREATE TABLE {external.quoted} USING parquet LOCATION '{data.as_uri()}' AS SELECT id FROM range(3)")
    managed_dir = Path(urlparse(described(fresh(spark), managed).location or "").path)  # type: ignore[union-attr]
    assert managed_dir.is_dir() and any(data.glob("*.parquet"))

    engine = ClassicEngine(fresh(spark))
    engine.drop(managed)
    engine.drop(external)
    engine.drop(TableRef(database, "never_there"))

    assert described(fresh(spark), managed) is None and described(fresh(spark), external) is None
    assert not managed_dir.exists()
    assert any(data.glob("*.parquet"))


def _statistics(spark, ref: TableRef) -> list[str]:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {ref.quoted}").collect()
    return [row["data_type"] for row in rows if row["col_name"] == "Statistics"]


@pytest.mark.parametrize("kind", ["datasource", "hive_serde"])
def test_relocate_leaves_what_set_location_and_set_tblproperties_leave_and_undoes_it(spark, database, kind, tmp_path):
    """The flip's one catalog call: the location, properties and statistics as the two statements
    leave them (other properties kept); its undo puts the entry back as it was."""
    using = "USING parquet" if kind == "datasource" else "STORED AS PARQUET"
    by_sql, by_call = TableRef(database, f"by_sql_{kind}"), TableRef(database, f"by_call_{kind}")
    for ref in (by_sql, by_call):
        spark.sql(f"CREATE TABLE {ref.quoted} (id BIGINT) {using} TBLPROPERTIES ('k'='v', 'kept'='1')")
        spark.sql(f"INSERT INTO {ref.quoted} SELECT id FROM range(3)")
        spark.sql(f"ANALYZE TABLE {ref.quoted} COMPUTE STATISTICS")
    new_data = (tmp_path / f"new data {kind}").as_uri()
    spark.sql(f"CREATE TABLE {database}.source_{kind} (id BIGINT) {using} LOCATION '{new_data}'")
    spark.sql(f"INSERT INTO {database}.source_{kind} SELECT id FROM range(5)")
    original, old_statistics = described(fresh(spark), by_call), _statistics(fresh(spark), by_call)
    assert len(old_statistics) == 1 and old_statistics[0].endswith(" 3 rows"), old_statistics

    spark.sql(f"ALTER TABLE {by_sql.quoted} SET LOCATION '{new_data}'")
    spark.sql(f"ALTER TABLE {by_sql.quoted} SET TBLPROPERTIES ('k'='w', 'n'='1')")
    undo = ClassicEngine(fresh(spark)).relocate(by_call, new_data, {"k": "w", "n": "1"})

    assert undo is not None
    session = fresh(spark)
    by_statements, relocated = described(session, by_sql), described(session, by_call)
    assert relocated is not None and by_statements is not None and original is not None
    assert relocated.location == by_statements.location != original.location
    assert {k: relocated.properties.get(k) for k in ("k", "n", "kept")} == {"k": "w", "n": "1", "kept": "1"}
    assert {k: by_statements.properties.get(k) for k in ("k", "n", "kept")} == {"k": "w", "n": "1", "kept": "1"}
    # The metastore sizes the new location; the old data's row count is gone either way.
    assert _statistics(session, by_call) == _statistics(session, by_sql) != old_statistics
    assert session.table(by_call.quoted).count() == 5

    undo()
    session = fresh(spark)
    restored = described(session, by_call)
    assert restored is not None
    assert restored.location == original.location
    assert (restored.properties.get("k"), "n" in restored.properties) == ("v", False)
    assert session.table(by_call.quoted).count() == 3


def test_on_glues_data_catalog_a_publish_by_rename_is_refused_before_any_write_and_a_flip_is_made(spark, database):
    """AWS's Glue client for Hive renames a table by copying it and deleting the old one. The client
    factory setting names it; Apache Spark's Hive 2.3 does not load that factory, so this metastore
    still serves the phases: what is tested is the decision, before any data is written."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set(GLUE_CLIENT_FACTORY_SETTING, "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory")
    try:
        created = executor_for(spark, f"{database}.fresh", "SELECT id FROM range(3)", mode="create")
        with pytest.raises(UnsupportedTargetError, match="a new table is published by renaming"):
            run_all(created)
        spark.sql(f"CREATE TABLE {database}.kept USING parquet AS SELECT id FROM range(5)")
        swapped = executor_for(spark, f"{database}.kept", "SELECT CAST(id AS STRING) AS id FROM range(3)",
                               mode="replace", allow_swap=True)  # fmt: skip
        with pytest.raises(UnsupportedTargetError, match="would swap the table by renaming"):
            run_all(swapped)
        flipped = executor_for(spark, f"{database}.kept", "SELECT id FROM range(3)", mode="replace")
        run_all(flipped)
    finally:
        hadoop.unset(GLUE_CLIENT_FACTORY_SETTING)
    assert flipped.details["publish"]["mechanism"] == "flip"
    tables = [r.tableName for r in fresh(spark).sql(f"SHOW TABLES IN {database}").collect()]
    assert tables == ["kept"], "no staging table was created"
    assert fresh(spark).table(f"{database}.kept").count() == 3
