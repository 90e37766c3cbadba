"""Filesystem access for what SQL statements about tables cannot do: marker files and orphan directories.

Two implementations with one interface:

- ``HadoopFileSystem`` goes through the driver's JVM (a classic session, spark-submit), so it works
  with every filesystem Spark is configured for (local, HDFS, S3A, ...).
- ``ConnectFileSystem`` has no JVM at hand (Spark Connect), so it asks the Spark Connect server:
  files are listed and read with Spark's own file sources, written with a one-row write, and
  deleted by the metastore (a managed scratch table whose partition points at the directory,
  dropped with PURGE). Every path reaches the server as a DataFrame argument or a quoted literal.

A marker written over Connect is a directory of part files (Spark writes no single named file);
both implementations read the newest part as the marker's text, so a marker update is a new part
file committed by Spark's file committer, never an in-place rewrite.
"""

from __future__ import annotations

import fnmatch
import uuid
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from airflow_provider_ctas.core.identifiers import RESERVED_PREFIX, quote, sql_string_literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession


class FileSystem(Protocol):
    def exists(self, uri: str) -> bool: ...

    def list_names(self, uri: str, pattern: str = "*") -> list[str]:
        """Names of ``uri``'s children matching the glob ``pattern``."""
        ...

    def marked_names(self, uri: str, pattern: str) -> list[str]:
        """Names of ``uri``'s children matching the glob ``pattern`` that hold a hidden entry (this
        provider's marker file, a Delta table's log): staging directories, each marked before
        anything else is written into it. One listing, one round trip over Spark Connect."""
        ...

    def has_files(self, uri: str) -> bool:
        """True when a data file exists below ``uri`` (directories and hidden files do not count)."""
        ...

    def modified_at(self, uri: str) -> float:
        """Seconds since the epoch."""
        ...

    def data_files(self, uri: str) -> list[tuple[str, int]]:
        """Every data file below ``uri`` (hidden files do not count): its path, as a Hadoop path
        names it (unescaped), and its bytes."""
        ...

    def read_text(self, uri: str) -> str | None: ...

    def write_text(self, uri: str, text: str) -> None: ...

    def delete(self, uri: str) -> None: ...


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


class HadoopFileSystem:
    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark._jvm
        self._jvm = jvm
        self._conf: Any = spark._jsc.hadoopConfiguration()
        self._checksummed: Any = jvm.java.lang.Class.forName("org.apache.hadoop.fs.ChecksumFileSystem")

    def _path(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path, path.getFileSystem(self._conf)

    def _small_file_fs(self, fs: Any) -> tuple[Any, bool]:
        """The filesystem for this provider's own small files, and whether it is local disk's raw one.

        Local disk's checksummed filesystem keeps a ``.crc`` beside each file, written separately:
        two drivers that rewrite one file at once (two flips retiring the same old version) can
        leave data and checksum from different writers, and every later read of it fails with a
        ChecksumException. Its raw filesystem has no checksum, and a rename there is atomic."""
        if self._checksummed.isInstance(fs):
            return fs.getRawFileSystem(), True
        return fs, False

    def exists(self, uri: str) -> bool:
        path, fs = self._path(uri)
        return bool(fs.exists(path))

    def list_names(self, uri: str, pattern: str = "*") -> list[str]:
        path, fs = self._path(uri)
        if not fs.exists(path):
            return []
        names = [str(status.getPath().getName()) for status in fs.listStatus(path)]
        return [name for name in names if fnmatch.fnmatchcase(name, pattern)]

    def marked_names(self, uri: str, pattern: str) -> list[str]:
        path, fs = self._path(f"{uri.rstrip('/')}/{pattern}/_*")
        found = fs.globStatus(path) or []  # None where nothing matches a path without wildcards
        return sorted({str(status.getPath().getParent().getName()) for status in found})

    def has_files(self, uri: str) -> bool:
        path, fs = self._path(uri)
        if not fs.exists(path):
            return False
        files = fs.listFiles(path, True)
        while files.hasNext():
            if not _hidden(str(files.next().getPath().getName())):
                return True
        return False

    def data_files(self, uri: str) -> list[tuple[str, int]]:
        path, fs = self._path(uri)
        found = []
        files = fs.listFiles(path, True)
        while files.hasNext():
            status = files.next()
            if not _hidden(str(status.getPath().getName())):
                found.append((str(status.getPath().toString()), int(status.getLen())))
        return found

    def modified_at(self, uri: str) -> float:
        path, fs = self._path(uri)
        return float(fs.getFileStatus(path).getModificationTime()) / 1000

    def read_text(self, uri: str) -> str | None:
        """The file's text; None when it is missing, also when another driver deletes it meanwhile."""
        from py4j.protocol import Py4JJavaError

        path, fs = self._path(uri)
        fs, _ = self._small_file_fs(fs)
        try:
            if fs.getFileStatus(path).isDirectory():  # written over Spark Connect: the newest part
                parts = [s for s in fs.listStatus(path) if not _hidden(str(s.getPath().getName()))]
                if not parts:
                    return None
                path = max(parts, key=lambda s: (s.getModificationTime(), str(s.getPath().getName()))).getPath()
            stream = fs.open(path)
        except Py4JJavaError as exc:
            if str(exc.java_exception.getClass().getName()) == "java.io.FileNotFoundException":
                return None
            raise
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, uri: str, text: str) -> None:
        """Replace the file whole: a reader sees the old text or the new, never a mix of two writers'.
        On local disk through a hidden temporary file renamed over it; elsewhere a created file
        appears when it is closed (an object store's PUT) or has a single writer (HDFS's lease)."""
        path, fs = self._path(uri)
        fs, local = self._small_file_fs(fs)
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path
        written = hadoop_path(path.getParent(), f".{path.getName()}.{uuid.uuid4().hex}.tmp") if local else path
        stream = fs.create(written, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        if not local:
            return
        if not fs.rename(written, path):
            fs.delete(written, False)
            raise OSError(f"could not replace {uri}")
        # A checksum left by an earlier checksummed write no longer matches.
        fs.delete(hadoop_path(path.getParent(), f".{path.getName()}.crc"), False)

    def delete(self, uri: str) -> None:
        """Delete ``uri`` and, on S3, abort the incomplete multipart uploads below it: a killed
        writer's half-uploaded files, which no listing of objects shows but the bucket keeps (and
        bills) until they are aborted."""
        path, fs = self._path(uri)
        fs.delete(path, True)
        if str(fs.getClass().getName()) == "org.apache.hadoop.fs.s3a.S3AFileSystem":
            key = str(fs.pathToKey(path)).rstrip("/") + "/"
            for upload in fs.listMultipartUploads(key):
                fs.abortMultipartUpload(upload)


class ConnectFileSystem:
    def __init__(self, spark: SparkSession, scratch_database: str | None = None) -> None:
        self.spark = spark
        self._scratch_database = scratch_database

    def _files(self, *globs: str) -> DataFrame:
        return (
            self.spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(list(globs))
            .select("path", "modificationTime", "length")
        )

    def _file_rows(self, *globs: str, limit: int | None = None) -> list[Row]:
        """Every non-hidden file below the paths ``globs`` match (none when they match nothing), in
        one round trip: a missing path fails the query itself."""
        from pyspark.errors import AnalysisException

        frame = self._files(*globs)
        try:
            return (frame if limit is None else frame.limit(limit)).collect()
        except AnalysisException as exc:
            if _path_not_found(exc):
                return []
            raise

    def exists(self, uri: str) -> bool:
        """Analysis alone, no job: it is where a missing path shows."""
        from pyspark.errors import AnalysisException

        try:
            self._files(uri).schema  # noqa: B018
        except AnalysisException as exc:
            if _path_not_found(exc):
                return False
            raise
        return True

    def list_names(self, uri: str, pattern: str = "*") -> list[str]:
        root = urlparse(uri).path.rstrip("/") + "/"
        names = set()
        for glob in (f"{uri}/{pattern}", f"{uri}/{pattern}/_*"):  # the second finds marker-only directories
            for row in self._file_rows(glob):
                relative = urlparse(row["path"]).path.split(root, 1)[-1]
                names.add(relative.split("/", 1)[0])
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

    def marked_names(self, uri: str, pattern: str) -> list[str]:
        """Spark's file sources skip a hidden file even where a path names it: a marker counts where
        it was written over Connect (a directory of part files), as does a Delta table's log."""
        root = urlparse(uri).path.rstrip("/") + "/"
        rows = self._file_rows(f"{uri.rstrip('/')}/{pattern}/_*")
        names = {urlparse(row["path"]).path.split(root, 1)[-1].split("/", 1)[0] for row in rows}
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

    def has_files(self, uri: str) -> bool:
        return bool(self._file_rows(uri, limit=1))

    def data_files(self, uri: str) -> list[tuple[str, int]]:
        return [(str(row["path"]), int(row["length"])) for row in self._file_rows(uri)]

    def modified_at(self, uri: str) -> float:
        """The newest file's time: a directory's own time is not visible over Connect (0 when empty)."""
        times = [row["modificationTime"].timestamp() for row in self._file_rows(uri, f"{uri}/_*")]
        return max(times, default=0.0)

    def read_text(self, uri: str) -> str | None:
        from pyspark.errors import AnalysisException

        try:
            rows = (
                self.spark.read.text(uri, wholetext=True)
                .select("value", "_metadata.file_modification_time", "_metadata.file_name")
                .collect()
            )
        except AnalysisException as exc:
            if _path_not_found(exc):
                return None
            raise
        if not rows:
            return None
        return str(max(rows, key=lambda r: (r["file_modification_time"], r["file_name"]))["value"])

    def write_text(self, uri: str, text: str) -> None:
        """The schema as a type, not DDL text: the client would send the text to the server to parse."""
        from pyspark.sql.types import StringType, StructField, StructType

        schema = StructType([StructField("value", StringType())])
        frame = self.spark.createDataFrame([(text,)], schema).coalesce(1)
        frame.write.mode("append").option("lineSep", "\n").text(uri)

    def delete(self, uri: str) -> None:
        """Let the metastore delete ``uri``: it deletes a managed table's partitions wherever they are."""
        database = self._scratch_database or self.spark.catalog.currentDatabase()
        scratch = f"{quote(database)}.{quote(f'{RESERVED_PREFIX}rm_{uuid.uuid4().hex[:16]}')}"
        self.spark.sql(
            f"CREATE TABLE {scratch} (`unused` INT, `p` STRING) USING parquet PARTITIONED BY (`p`) "
            "TBLPROPERTIES ('airflow_ctas.purpose'='deletes a directory this provider created')"
        )
        try:
            self.spark.sql(f"ALTER TABLE {scratch} ADD PARTITION (`p` = '0') LOCATION {sql_string_literal(uri)}")
        finally:
            self.spark.sql(f"DROP TABLE IF EXISTS {scratch} PURGE")


def _path_not_found(exc: BaseException) -> bool:
    return "PATH_NOT_FOUND" in str(getattr(exc, "getCondition", lambda: "")() or exc)
