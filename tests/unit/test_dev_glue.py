"""The dev stack's Glue: what the request log records of a Glue request, and the conf it gives Spark."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from ctas_devstack import glue

pytestmark = pytest.mark.unit


def _environ(target: str, body: dict[str, object]) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    return {"HTTP_X_AMZ_TARGET": target, "CONTENT_LENGTH": str(len(raw)), "wsgi.input": io.BytesIO(raw)}


def test_an_update_is_logged_with_the_version_it_sent_and_its_body_stays_readable():
    environ = _environ("AWSGlue.UpdateTable", {"DatabaseName": "db", "VersionId": "7", "TableInput": {"Name": "t"}})
    assert glue.glue_request(environ) == {"glue": "UpdateTable", "version_id": "7"}
    assert json.loads(environ["wsgi.input"].read())["VersionId"] == "7", "moto still reads the whole body"
    unversioned = _environ("AWSGlue.UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t"}})
    assert glue.glue_request(unversioned) == {"glue": "UpdateTable", "version_id": None}
    assert glue.glue_request(_environ("AWSGlue.GetTable", {"Name": "t"})) == {"glue": "GetTable"}
    assert glue.glue_request({"REQUEST_METHOD": "PUT", "PATH_INFO": "/bucket/key"}) is None, "S3 is not read"


def test_the_catalog_conf_carries_no_credentials():
    conf = glue.catalog_conf("g", "http://127.0.0.1:9000", "s3://warehouse/glue")
    assert conf["spark.sql.catalog.g.type"] == "glue"
    assert not any(value in {glue.credentials_env()["AWS_SECRET_ACCESS_KEY"]} for value in conf.values())
