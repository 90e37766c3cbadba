"""Hadoop FileSystem access from the driver, for what SQL cannot do: marker files and orphan directories.

Goes through the driver's JVM, so it works with every filesystem Spark is configured for (local,
HDFS, S3A, ...). Needs a classic (non-Connect) session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class HadoopFileSystem:
    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark._jvm
        self._conf: Any = spark._jsc.hadoopConfiguration()

    def _path(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path, path.getFileSystem(self._conf)

    def exists(self, uri: str) -> bool:
        path, fs = self._path(uri)
        return bool(fs.exists(path))

    def list_names(self, uri: str) -> list[str]:
        path, fs = self._path(uri)
        if not fs.exists(path):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(path)]

    def has_files(self, uri: str) -> bool:
        """True when any file exists below ``uri`` (directories alone do not count)."""
        path, fs = self._path(uri)
        if not fs.exists(path):
            return False
        files = fs.listFiles(path, True)
        return bool(files.hasNext())

    def modified_at(self, uri: str) -> float:
        """Modification time in seconds since the epoch."""
        path, fs = self._path(uri)
        return float(fs.getFileStatus(path).getModificationTime()) / 1000

    def read_text(self, uri: str) -> str | None:
        path, fs = self._path(uri)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, uri: str, text: str) -> None:
        path, fs = self._path(uri)
        stream = fs.create(path, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def delete(self, uri: str) -> bool:
        path, fs = self._path(uri)
        return bool(fs.delete(path, True))
