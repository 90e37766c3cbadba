"""What a flip or a partition switch keeps of the table it publishes into, through the real phases
in the test's session against the metastore service: the files it hands the table are written as
the table's own ``INSERT`` writes them, or the publish is refused before anything is written."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from airflow_provider_ctas.catalogs.session_catalog.plan import Publish
from airflow_provider_ctas.core.errors import UnsupportedTargetError
from airflow_provider_ctas.spark.errors import classify
from tests.support.catalog import fresh
from tests.support.phases import executor_for, run_all

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", ["replace", "overwrite_partitions"])
def test_the_new_version_is_written_with_the_target_s_options(spark, database, mode: str):
    """A CSV table's separator and header are its OPTIONS: the files a flip or a partition switch
    hands the table are written with them, as an ``INSERT`` into it writes them, so its readers read
    the new rows as written (written with Spark's defaults, they read ``id`` as NULL). An option
    whose key Spark redacts in what it shows (``auth.token``) is read as it is by a classic driver,
    so such a table is replaced as any other (over Spark Connect it is refused)."""
    target = f"{database}.csv_{mode}"
    partitioned = mode == "overwrite_partitions"
    # The partition column's value, declaration, clause and selection, or nothing.
    ds, ds_column, by_ds, ds_selected = (
        (", 'a'", ", ds STRING", " PARTITIONED BY (ds)", ", 'a' AS ds") if partitioned else ("", "", "", "")
    )
    spark.sql(
        f"CREATE TABLE {target} (id BIGINT, s STRING{ds_column}) USING csv "
        f"OPTIONS (sep ';', header 'true', `auth.token` 'x'){by_ds}"
    )
    spark.sql(f"INSERT INTO {target} VALUES (9, 'old;9'{ds})")
    sql = f"SELECT id, concat('new;', CAST(id AS STRING)) AS s{ds_selected} FROM range(3)"
    executor = executor_for(spark, target, sql, mode=mode, table_format="csv",
                            partition_by=["ds"] if partitioned else [])  # fmt: skip
    run_all(executor)

    assert executor.planned().mechanism is (Publish.PARTITIONS if partitioned else Publish.FLIP)
    assert sorted(tuple(r) for r in fresh(spark).table(target).select("id", "s").collect()) == [
        (0, "new;0"),
        (1, "new;1"),
        (2, "new;2"),
    ]
    staged = Path(urlparse(executor.ctx.staging_directory or "").path)
    firsts = {path.read_text().splitlines()[0] for path in staged.rglob("part-*")}
    assert firsts == {"id;s"}, firsts


def test_partitions_of_a_bucketed_table_are_refused_and_the_table_stays_readable(spark, database):
    """A write into a directory cannot bucket its files (only a table's insert does), and a bucketed
    table with a file that has no bucket id fails every read (``INVALID_BUCKET_FILE``)."""
    target = f"{database}.bucketed"
    spark.sql(
        f"CREATE TABLE {target} (id BIGINT, v STRING, ds STRING) USING parquet PARTITIONED BY (ds) "
        "CLUSTERED BY (id) INTO 4 BUCKETS"
    )
    spark.sql(f"INSERT INTO {target} SELECT id, 'old', 'a' FROM range(10)")
    executor = executor_for(spark, target, "SELECT id, 'new' AS v, 'a' AS ds FROM range(20)",
                            mode="overwrite_partitions", partition_by=["ds"])  # fmt: skip
    with pytest.raises(UnsupportedTargetError, match="it is bucketed"):
        run_all(executor)

    assert executor.ctx.staging_directory is None, "refused before staging was made"
    assert fresh(spark).sql(f"SELECT v, count(*) FROM {target} GROUP BY v").collect() == [("old", 10)]


@pytest.mark.parametrize("mode", ["replace", "overwrite_partitions"])
def test_char_and_varchar_columns_are_written_as_an_insert_into_them_writes_them(spark, database, mode: str):
    """Spark's queries give CHAR and VARCHAR values as strings, so the query fits the table; the
    write checks and pads them as the table's own ``INSERT OVERWRITE`` does, row for row, and a value
    too long for its column fails the try with the table untouched."""
    partitioned = mode == "overwrite_partitions"
    by_ds, ds = (" PARTITIONED BY (ds)", ", 'a' AS ds") if partitioned else ("", "")
    tables = {name: f"{database}.{name}_{mode}" for name in ("atomic", "plain")}
    for table in tables.values():
        spark.sql(
            f"CREATE TABLE {table} (id BIGINT, c CHAR(3), v VARCHAR(3){', ds STRING' if partitioned else ''}) "
            f"USING parquet{by_ds}"
        )
        spark.sql(f"INSERT INTO {table} SELECT 9, 'old', 'old'{ds}")
    values = "('a', 'a'), ('abc', 'abc  '), (NULL, NULL), ('ab ', 'ab    ')"
    fits = f"SELECT CAST(row_number() OVER (ORDER BY c, v) AS BIGINT) AS id, c, v{ds} FROM VALUES {values} AS t(c, v)"
    spark.sql(f"INSERT OVERWRITE {tables['plain']} {fits}")
    run_all(executor_for(spark, tables["atomic"], fits, mode=mode, partition_by=["ds"] if partitioned else []))

    def rows(table: str) -> list[tuple]:
        return sorted(
            tuple(r) for r in fresh(spark).sql(f"SELECT id, c, v, length(c), length(v) FROM {table}").collect()
        )

    assert rows(tables["atomic"]) == rows(tables["plain"])
    written = [row[1:] for row in rows(tables["atomic"])]
    assert ("a  ", "a", 3, 1) in written, "a CHAR padded, a VARCHAR not"
    assert ("ab ", "ab ", 3, 3) in written, "trailing spaces trimmed to the length"
    too_long = f"SELECT CAST(1 AS BIGINT) AS id, 'abcd' AS c, 'a' AS v{ds}"
    with pytest.raises(Exception, match="EXCEED_LIMIT_LENGTH"):
        spark.sql(f"INSERT OVERWRITE {tables['plain']} {too_long}")
    before = rows(tables["atomic"])
    with pytest.raises(Exception, match="EXCEED_LIMIT_LENGTH") as failed:
        run_all(executor_for(spark, tables["atomic"], too_long, mode=mode, partition_by=["ds"] if partitioned else []))
    assert classify(failed.value).code == "QUERY_FAILED", "the same data fails every try: not retried"
    assert rows(tables["atomic"]) == before
