"""begin's decisions as pure logic: which publish mechanism, which shape check, what the fence and
the ownership predicates accept. No JVM."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from airflow_provider_ctas.catalogs.metastore import ownership
from airflow_provider_ctas.catalogs.session_catalog.plan import (
    Plan,
    Publish,
    choose_mechanism,
    column_order,
    length_checked,
    length_checks,
    on_object_store,
    partition_directories,
    schema_drift,
    shape_differences,
    unescape_path_name,
    written_type,
)
from airflow_provider_ctas.core import markers
from airflow_provider_ctas.core.errors import CorruptStateError, PublishError, QueryError, UnsupportedTargetError
from airflow_provider_ctas.core.modes import Mode
from airflow_provider_ctas.core.transaction import Outcome

NEW = (("id", "bigint"), ("name", "string"))


@dataclass
class Shape:
    provider: str = "parquet"
    table_type: str = "MANAGED"
    partition_columns: list[str] = field(default_factory=list)
    bucketed: bool = False
    columns: list[tuple[str, str]] = field(default_factory=lambda: list(NEW))


def choose(info: Shape | None, mode: Mode = Mode.REPLACE, allow_swap: bool = False, partition_by=(), new=NEW, **kw):
    return choose_mechanism(
        target="db.t",
        info=info,
        mode=mode,
        table_format="parquet",
        partition_by=partition_by,
        allow_swap=allow_swap,
        new=new,
        **kw,
    )


def test_a_new_target_is_renamed_in_and_a_same_shape_one_is_flipped():
    assert choose(None, Mode.CREATE) == (Publish.RENAME, [])
    assert choose(Shape()) == (Publish.FLIP, [])


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        (Shape(provider="orc"), "its format is orc"),
        (Shape(partition_columns=["name"]), "partitioned"),
        (Shape(bucketed=True), "bucketed"),
        (Shape(columns=[("id", "int"), ("name", "string")]), "its columns are (id int, name string)"),
        (Shape(columns=[("name", "string"), ("id", "bigint")]), "its columns are"),  # order matters to a flip
    ],
)
def test_a_changed_shape_needs_allow_swap(shape, problem):
    with pytest.raises(UnsupportedTargetError, match="allow_swap=True") as refused:
        choose(shape)
    assert problem in str(refused.value)
    mechanism, problems = choose(shape, allow_swap=True)
    assert mechanism is Publish.SWAP
    assert any(problem in p for p in problems)


def test_partitions_are_switched_only_when_the_query_fits_the_table():
    table = Shape(partition_columns=["ds"], columns=[("id", "bigint"), ("ds", "string")])
    fits = (("id", "bigint"), ("ds", "string"))
    assert choose(table, Mode.OVERWRITE_PARTITIONS, partition_by=("ds",), new=fits) == (Publish.PARTITIONS, [])
    drifted = (("id", "int"), ("extra", "string"), ("ds", "string"))
    with pytest.raises(QueryError, match="schema drift, nothing was written") as refused:
        choose(table, Mode.OVERWRITE_PARTITIONS, partition_by=("ds",), new=drifted)
    assert "column(s) extra the table does not have" in str(refused.value)
    assert "id bigint -> int" in str(refused.value)


def test_partitions_of_a_bucketed_table_are_not_switched():
    """Its staged files, written into a directory, have no bucket ids (``INVALID_BUCKET_FILE``)."""
    table = Shape(partition_columns=["ds"], bucketed=True, columns=[("id", "bigint"), ("ds", "string")])
    with pytest.raises(UnsupportedTargetError, match=r"it is bucketed.*Nothing was written"):
        choose(table, Mode.OVERWRITE_PARTITIONS, partition_by=("ds",), new=(("id", "bigint"), ("ds", "string")))


def test_a_query_s_strings_fit_char_and_varchar_columns_and_are_written_with_their_lengths():
    declared = Shape(columns=[("id", "bigint"), ("code", "char(3)"), ("name", "varchar(10)")])
    new = (("id", "bigint"), ("code", "string"), ("name", "string"))
    assert choose(declared, new=new) == (Publish.FLIP, [])
    assert schema_drift(declared, "parquet", (), new) == []
    assert [written_type(t) for _, t in declared.columns] == ["bigint", "string", "string"]
    checks = length_checks(declared.columns)
    assert sorted(checks) == ["code", "name"]
    assert checks["code"].startswith("rpad(CASE WHEN `code` IS NULL OR length(`code`) <= 3 THEN `code` ")
    assert checks["code"].endswith(", 3, ' ') AS `code`")
    assert "length(rtrim(`name`)) <= 10 THEN substr(`name`, 1, 10)" in checks["name"]
    assert (
        "raise_error('[EXCEED_LIMIT_LENGTH] Exceeds char/varchar type length limitation: 10 (name)')" in checks["name"]
    )
    assert length_checked("s", "string") is None
    assert length_checked("s", "struct<a:varchar(3)>") is None, "a nested one is not a column's own type"


def test_shape_checks_return_nothing_when_nothing_differs():
    assert shape_differences(Shape(), "parquet", (), NEW) == []
    table = Shape(partition_columns=["DS"], columns=[("ID", "bigint"), ("ds", "string")])
    assert schema_drift(table, "parquet", ("ds",), (("id", "bigint"), ("ds", "string"))) == []
    assert schema_drift(table, "parquet", ("other",), (("id", "bigint"), ("ds", "string")))


def test_column_order_puts_partition_columns_last_and_refuses_what_cannot_be_a_table():
    assert column_order(["ds", "id", "Name"], ("ds",)) == ["id", "Name", "ds"]
    assert column_order(["DS", "id"], ("ds",)) == ["id", "DS"]
    with pytest.raises(QueryError, match="duplicate column names: id"):
        column_order(["id", "ID"], ())
    with pytest.raises(QueryError, match="not produced by the SELECT"):
        column_order(["id"], ("ds",))
    with pytest.raises(QueryError, match="at least one data column"):
        column_order(["ds"], ("ds",))


def test_a_plan_is_data_that_round_trips_and_refuses_garbage():
    plan = Plan(Publish.FLIP, NEW, "file:/w/db.db/__ctas_x_s1")
    assert Plan.from_dict(plan.to_dict()) == plan
    assert plan.external_staging and not Plan(Publish.RENAME).external_staging
    assert Plan.from_dict(Plan(skip=Outcome.TARGET_EXISTS).to_dict()).skip is Outcome.TARGET_EXISTS
    for bad in ({}, {**plan.to_dict(), "mechanism": "teleport"}, {**plan.to_dict(), "columns": [1]}):
        with pytest.raises(CorruptStateError):
            Plan.from_dict(bad)


TXN = "0123456789abcdef0123456789abcdef"


def test_ownership_predicates_recovery_and_gc_share():
    props = {markers.TXN_ID: TXN, markers.TRY_NUMBER: "2"}
    assert ownership.is_staging_of(props, TXN, 2)
    assert not ownership.is_staging_of(props, TXN, 1)
    assert not ownership.is_staging_of({**props, markers.TXN_ID: "f" * 32}, TXN, 2)
    name = markers.parse_reserved_name(markers.staging_name(TXN, 2))
    assert name is not None and ownership.is_staging_named(props, name)
    assert not ownership.is_staging_named({}, name)
    backup = {
        markers.SUPERSEDED_BY: markers.superseded_by_value(TXN, 3),
        markers.SUPERSEDED_TARGET: "spark_catalog.d.t",
    }
    assert ownership.moved_aside_by(backup) == (TXN, "spark_catalog.d.t")
    assert ownership.moved_aside_by({markers.SUPERSEDED_BY: markers.superseded_by_value(TXN, 3)}) is None
    assert ownership.feeds("/w/d/__ctas_x_s1", ["/w/d/__ctas_x_s1/ds=1"])
    assert ownership.feeds("/w/d/t/", ["/w/d/t"])
    assert not ownership.feeds("/w/d/t", ["/w/d/t2"])
    assert "someone other than airflow-provider-ctas" in ownership.describe_owner({})


def test_on_an_object_store_nothing_publishes_by_moving_data():
    assert on_object_store("s3a://bucket/warehouse/db.db") and on_object_store("GS://b/w")
    assert not on_object_store("file:/w/db.db") and not on_object_store("hdfs://nn/w") and not on_object_store("/w")
    # A new table and a swap publish external staging there: the rename is metadata only.
    assert Plan(Publish.RENAME, object_store=True).external_staging
    assert Plan(Publish.SWAP, object_store=True).external_staging
    assert not Plan(Publish.RENAME).external_staging  # a new table on HDFS or local disk: a managed rename
    assert Plan.from_dict(Plan(Publish.RENAME, object_store=True).to_dict()).object_store
    reshaped = Shape(columns=[("id", "int")])
    with pytest.raises(UnsupportedTargetError, match="copy every object"):
        choose(reshaped, allow_swap=True, object_store=True)  # a managed target's rename copies its data
    assert choose(Shape(table_type="EXTERNAL", columns=[("id", "int")]), allow_swap=True, object_store=True)[0] is (
        Publish.SWAP
    )
    assert choose(Shape(), object_store=True) == (Publish.FLIP, [])  # same shape: a flip copies nothing


def test_nothing_is_published_into_a_default_location_that_may_hold_a_superseded_version():
    """A swap always stages external: the target's default location may hold a version a flip
    superseded and keeps for readers, and a managed rename into it fails (issue 44). A new table
    whose default location is taken that way is published where it was written."""
    assert Plan(Publish.SWAP).external_staging
    assert Plan(Publish.RENAME, default_location_taken=True).external_staging
    assert Plan.from_dict(Plan(Publish.RENAME, default_location_taken=True).to_dict()).default_location_taken
    assert not Plan.from_dict({**Plan(Publish.RENAME).to_dict(), "default_location_taken": False}).external_staging


@pytest.mark.parametrize("object_store", [False, True])
def test_a_flip_and_a_partition_switch_stage_without_a_table(object_store):
    """They hand the target directories, and a marker fences them; a rename and a swap move the
    staging table itself."""
    registered = {m: Plan(m, object_store=object_store).registered_staging for m in Publish}
    assert registered == {Publish.RENAME: True, Publish.SWAP: True, Publish.FLIP: False, Publish.PARTITIONS: False}
    assert Plan(Publish.FLIP, object_store=object_store).external_staging
    assert Plan(Publish.PARTITIONS, object_store=object_store).external_staging


@pytest.mark.parametrize(
    "root",
    [
        "file:/w/db.db/__ctas_x_s1",
        "file:///w/db.db/__ctas_x_s1/",
        "/w/db.db/__ctas_x_s1",
        "s3a://bucket/w/db.db/__ctas_x_s1",
    ],
)
def test_staged_partitions_are_read_from_the_directories_a_partitioned_write_left(root):
    listed_root = root.rstrip("/").replace("file:///", "file:/")
    files = [
        f"{listed_root}/DS=2024-01-01/h=1/part-0.parquet",
        f"{listed_root}/DS=2024-01-01/h=1/part-1.parquet",
        f"{listed_root}/DS=a%2Fb/h=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
        f"{listed_root}/DS=100%25 %C3/h=x=y/part-0.parquet",
    ]
    found = partition_directories(root, files, ["ds", "h"])
    base = root.rstrip("/")
    assert found == {
        ("2024-01-01", "1"): f"{base}/DS=2024-01-01/h=1",
        ("a/b", "__HIVE_DEFAULT_PARTITION__"): f"{base}/DS=a%2Fb/h=__HIVE_DEFAULT_PARTITION__",
        ("100% \xc3", "x=y"): f"{base}/DS=100%25 %C3/h=x=y",
    }
    assert partition_directories(root, [], ["ds"]) == {}


@pytest.mark.parametrize(
    "file",
    [
        "/w/db.db/__ctas_x_s1/part-0.parquet",  # not in a partition
        "/w/db.db/__ctas_x_s1/ds=1/part-0.parquet",  # one level short
        "/w/db.db/__ctas_x_s1/ds=1/other=2/part-0.parquet",  # another column
        "/w/db.db/__ctas_x_s1/ds=1/h/part-0.parquet",  # not name=value
        "/w/db.db/elsewhere/ds=1/h=2/part-0.parquet",  # outside the directory
    ],
)
def test_a_file_outside_the_partition_layout_fails_the_try(file):
    with pytest.raises(PublishError, match="not in a partition directory"):
        partition_directories("/w/db.db/__ctas_x_s1", [file], ["ds", "h"])


def test_unescaping_decodes_what_spark_escapes_in_a_path_and_nothing_else():
    assert unescape_path_name("a%2Fb%3Dc%25d%3A") == "a/b=c%d:"
    assert unescape_path_name("100%") == "100%" and unescape_path_name("%zz") == "%zz"
    assert unescape_path_name("ü é") == "ü é"
