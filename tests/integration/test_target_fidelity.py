"""What a flip or a partition switch keeps of the table it publishes into, through the real phases
in the test's session against the metastore service: the files it hands the table are written as
the table's own ``INSERT`` writes them, or the publish is refused before anything is written."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from airflow_provider_ctas.catalogs.session_catalog.plan import Publish
from airflow_provider_ctas.core.errors import UnsupportedTargetError
from tests.support.catalog import fresh
from tests.support.phases import executor_for, run_all

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", ["replace", "overwrite_partitions"])
def test_the_new_version_is_written_with_the_target_s_options(spark, database, mode: str):
    """A CSV table's separator and header are its OPTIONS: the files a flip or a partition switch
    hands the table are written with them, as an ``INSERT`` into it writes them, so its readers read
    the new rows as written (written with Spark's defaults, they read ``id`` as NULL)."""
    target = f"{database}.csv_{mode}"
    partitioned = mode == "overwrite_partitions"
    # The partition column's value, declaration, clause and selection, or nothing.
    ds, ds_column, by_ds, ds_selected = (
        (", 'a'", ", ds STRING", " PARTITIONED BY (ds)", ", 'a' AS ds") if partitioned else ("", "", "", "")
    )
    spark.sql(
        f"CREATE TABLE {target} (id BIGINT, s STRING{ds_column}) USING csv OPTIONS (sep ';', header 'true'){by_ds}"
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
