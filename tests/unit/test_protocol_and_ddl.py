from __future__ import annotations

import json

import grpc
import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
)

from airflow_provider_ctas.catalogs.query import as_subquery, clean_sql
from airflow_provider_ctas.core.errors import CorruptStateError, InvalidInputError
from airflow_provider_ctas.core.protocol import (
    ABORT_PHASES,
    RUN_PHASES,
    PhaseReport,
    PhaseRequest,
    PhaseResult,
    Reached,
    error_info,
)
from airflow_provider_ctas.spark.catalog_entry import parse_describe
from airflow_provider_ctas.spark.ddl import columns_ddl
from airflow_provider_ctas.spark.errors import first_line
from ctas_devstack.metastore import free_port


def test_request_round_trip_and_validation():
    request = PhaseRequest(phases=RUN_PHASES, table={"kind": "x"}, sql="SELECT 1", result_path="/r", faults={})
    assert PhaseRequest.from_json(request.to_json()) == request
    data = json.loads(request.to_json())
    for change in (
        {"protocol": 1},  # an older driver or worker: refused, never half-understood
        {"coordinator": "127.0.0.1:1"},
        {"phases": ["commit"]},
        {"phases": ["begin", "prepare", "commit", "abort"]},
        {"sql": None},
        {"table": "x"},
        {"extra": 1},
    ):
        with pytest.raises(CorruptStateError):
            PhaseRequest.from_json(json.dumps({**data, **change}))
    abort = PhaseRequest(phases=ABORT_PHASES, table={}, sql=None)
    assert PhaseRequest.from_json(abort.to_json()).phases == ("abort",)
    with pytest.raises(CorruptStateError, match="commit phase only"):
        PhaseRequest.from_json(json.dumps({**json.loads(abort.to_json()), "coordinator": {"port": 1}}))
    coordinated = PhaseRequest(phases=RUN_PHASES, table={}, sql="SELECT 1", coordinator={"port": 1})
    assert PhaseRequest.from_json(coordinated.to_json()) == coordinated


def test_result_round_trip():
    report = PhaseReport("commit", "ok", 0.25, ["db.t renamed"], "decided in 1 ms")
    result = PhaseResult(
        ok=True, reached=Reached.COMMITTED, outcome="published", details={"row_count": 3}, phases=[report]
    )
    assert PhaseResult.from_json(result.to_json()) == result
    failed = PhaseResult(error=error_info("SPARK_ERROR", "x" * 5000, "prepare"))
    assert PhaseResult.from_json(failed.to_json()) == failed
    assert len(failed.error["message"]) == 4000 if failed.error else False


@pytest.mark.parametrize(
    "change",
    [
        {"ok": "yes"},
        {"reached": "somewhere"},
        {"extra": 1},
        {"error": {"code": "X"}},
        {"phases": [{"phase": "begin", "status": "great", "seconds": 1, "touched": [], "note": ""}]},
        {"details": []},
    ],
)
def test_a_malformed_result_is_refused_not_half_read(change):
    data = json.loads(PhaseResult(ok=True, reached=Reached.COMMITTED).to_json())
    with pytest.raises(CorruptStateError):
        PhaseResult.from_json(json.dumps({**data, **change}))
    with pytest.raises(CorruptStateError):
        PhaseResult.from_json("not json")


def test_sql_is_wrapped_as_a_subquery():
    assert clean_sql("SELECT 1;\n ;  ") == "SELECT 1"
    assert (
        as_subquery("SELECT 1 -- trailing comment")
        == "SELECT * FROM (\nSELECT 1 -- trailing comment\n) AS __ctas_source"
    )
    with pytest.raises(InvalidInputError, match="empty"):
        clean_sql(" ;; ")


def test_column_ddl_quotes_every_name():
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("a`b", StringType()),
            StructField(
                "nested",
                StructType([StructField("x y", DecimalType(10, 2)), StructField("t", TimestampNTZType())]),
            ),
            StructField("tags", ArrayType(StructType([StructField("k", StringType())]))),
            StructField("m", MapType(StringType(), LongType())),
        ]
    )
    assert columns_ddl(schema) == (
        "`id` bigint, `a``b` string, `nested` STRUCT<`x y`: decimal(10,2), `t`: timestamp_ntz>, "
        "`tags` ARRAY<STRUCT<`k`: string>>, `m` MAP<string, bigint>"
    )


class _Row(dict):
    pass


def test_parse_describe():
    rows = [
        _Row(col_name="a", data_type="bigint"),
        _Row(col_name="p", data_type="string"),
        _Row(col_name="# Partition Information", data_type=""),
        _Row(col_name="# col_name", data_type="data_type"),
        _Row(col_name="p", data_type="string"),
        _Row(col_name="", data_type=""),
        _Row(col_name="# Detailed Table Information", data_type=""),
        _Row(col_name="Type", data_type="MANAGED"),
        _Row(col_name="Location", data_type="file:/w/t"),
    ]
    columns, partitions, details = parse_describe(rows)  # type: ignore[arg-type]
    assert columns == [("a", "bigint"), ("p", "string")]
    assert partitions == ["p"]
    assert details == {"Type": "MANAGED", "Location": "file:/w/t"}


def test_a_grpc_error_reads_as_its_status_and_details():
    with grpc.insecure_channel(f"127.0.0.1:{free_port()}") as channel, pytest.raises(grpc.RpcError) as raised:
        channel.unary_unary("/nobody.Here/Call")(b"", timeout=10)
    assert first_line(raised.value).startswith("UNAVAILABLE: "), str(raised.value)
    assert first_line(ValueError("one\ntwo")) == "one"


def test_a_wrapped_grpc_error_reads_as_its_status_and_details():
    text = (
        "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAUTHENTICATED\n"
        '\tdetails = "No authentication token provided"\n\tdebug_error_string = "UNAUTHENTICATED:No auth"\n>'
    )
    assert first_line(RuntimeError(text)) == "UNAUTHENTICATED: No authentication token provided"
    py4j = "An error occurred while calling o176.glue.\n: java.lang.IllegalArgumentException: no region\n\tat x.y(Z)"
    assert (
        first_line(RuntimeError(py4j))
        == "An error occurred while calling o176.glue: java.lang.IllegalArgumentException: no region"
    )


def test_a_missing_bucket_or_refused_credentials_are_not_retried():
    from airflow_provider_ctas.spark.errors import classify

    missing = RuntimeError(
        "An error occurred while calling o35.create.\n: org.apache.hadoop.fs.s3a.UnknownStoreException: "
        "`s3a://nosuchbucket/db/x/_m.json': getFileStatus ...: NoSuchBucketException: "
        "The specified bucket does not exist"
    )
    error = classify(missing)
    assert (error.code, error.retryable) == ("STORAGE_NOT_FOUND", False)
    assert "bucket does not exist" in str(error)
    denied = RuntimeError("java.nio.file.AccessDeniedException: s3a://b/k: getFileStatus on s3a://b/k: Access Denied")
    assert (classify(denied).code, classify(denied).retryable) == ("STORAGE_ACCESS_DENIED", False)
    refused = RuntimeError("org.apache.hadoop.net.ConnectTimeoutException: connect to 127.0.0.1:9 timed out")
    assert (classify(refused).code, classify(refused).retryable) == ("SPARK_ERROR", True)  # may pass on a retry


def test_an_unreachable_metastore_is_named_and_retried():
    from airflow_provider_ctas.spark.errors import classify

    # What the driver reported when the fault matrix stopped the metastore service at the publish.
    down = RuntimeError(
        "[_LEGACY_ERROR_TEMP_3065] org.apache.hadoop.hive.ql.metadata.HiveException: Unable to fetch table "
        "__ctas_cfb8521d0c9a7e28_s1. Could not connect to meta store using any of the URIs provided. Most recent "
        "failure: org.apache.thrift.transport.TTransportException: java.net.ConnectException: Connection refused"
    )
    error = classify(down)
    assert (error.code, error.retryable) == ("CATALOG_UNAVAILABLE", True)
    assert "hive.metastore.uris" in str(error)
