"""Reading a Delta log as files (pure logic over a dict of files; the real logs are read in
tests/integration/test_delta.py)."""

from __future__ import annotations

import fnmatch
import json

from airflow_provider_ctas.catalogs.delta import log

TABLE = "file:/warehouse/db/__ctas_0123456789abcdef_s1"


class Files:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def list_names(self, uri: str, pattern: str = "*") -> list[str]:
        names = [path[len(uri) + 1 :] for path in self.files if path.startswith(uri + "/")]
        return [name for name in names if "/" not in name and fnmatch.fnmatchcase(name, pattern)]

    def read_text(self, uri: str) -> str | None:
        return self.files.get(uri)


def commit(version: int, *actions: dict[str, object]) -> tuple[str, str]:
    return f"{TABLE}/_delta_log/{version:020d}.json", "\n".join(json.dumps(a) for a in actions)


CREATED = commit(
    0,
    {"commitInfo": {"operation": "CREATE TABLE AS SELECT", "userMetadata": "{}"}},
    {"protocol": {"minReaderVersion": 1}},
    {"metaData": {"id": "x", "configuration": {"airflow_ctas.txn_id": "0123456789abcdef" * 2, "n": 1}}},
)
WRITTEN = commit(1, {"commitInfo": {"operation": "WRITE", "operationMetrics": {"numOutputRows": "7"}}})


def test_the_newest_commit_is_the_highest_listed_version_not_the_newest_name():
    files = Files(dict([CREATED, WRITTEN, (f"{TABLE}/_delta_log/00000000000000000001.crc", "")]))
    files.files[f"{TABLE}/_delta_log/00000000000000000010.checkpoint.json"] = ""
    assert log.latest_version(files, TABLE) == 1
    assert log.latest_version(Files({}), TABLE) is None


def test_a_commit_s_info_and_the_first_commit_s_properties():
    files = Files(dict([CREATED, WRITTEN]))
    assert log.commit_info(files, TABLE, 1) == {"operation": "WRITE", "operationMetrics": {"numOutputRows": "7"}}
    assert log.created_properties(files, TABLE) == {"airflow_ctas.txn_id": "0123456789abcdef" * 2, "n": "1"}


def test_a_missing_or_unreadable_log_proves_nothing():
    assert log.created_properties(Files({}), TABLE) is None
    assert log.commit_info(Files(dict([CREATED])), TABLE, 1) is None
    path, _ = CREATED
    assert log.created_properties(Files({path: "not json\n"}), TABLE) is None
    assert log.created_properties(Files(dict([WRITTEN])), TABLE) is None
