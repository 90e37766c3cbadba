"""A Delta table's transaction log, read as files.

Delta's protocol keeps one file per commit, ``_delta_log/<version, 20 digits>.json``, one action
per line. Reading it directly is a listing and one small file where ``DESCRIBE HISTORY`` costs a
fresh driver about a second, and it works where no catalog entry exists: a staging table's
directory whose ``CREATE TABLE`` commit landed before its task was killed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol


class FileReader(Protocol):
    def list_names(self, uri: str, pattern: str = "*") -> list[str]: ...

    def read_text(self, uri: str) -> str | None: ...


def latest_version(fs: FileReader, location: str) -> int | None:
    listed = [name[: -len(".json")] for name in fs.list_names(f"{location}/_delta_log", "*.json")]
    return max((int(v) for v in listed if v.isdigit()), default=None)


def _action(fs: FileReader, location: str, version: int, kind: str) -> Mapping[str, Any] | None:
    """The first ``kind`` action of commit ``version``; None when the commit or the action is missing."""
    text = fs.read_text(f"{location}/_delta_log/{version:020d}.json")
    for line in (text or "").splitlines():
        try:
            action = json.loads(line)
        except ValueError:
            return None
        if isinstance(action, dict) and isinstance(action.get(kind), dict):
            return dict(action[kind])
    return None


def commit_info(fs: FileReader, location: str, version: int) -> Mapping[str, Any] | None:
    return _action(fs, location, version, "commitInfo")


def created_properties(fs: FileReader, location: str) -> dict[str, str] | None:
    """The table properties the table's first commit set (where this provider's markers are)."""
    metadata = _action(fs, location, 0, "metaData")
    if metadata is None:
        return None
    configuration = metadata.get("configuration")
    return {str(k): str(v) for k, v in configuration.items()} if isinstance(configuration, dict) else {}
