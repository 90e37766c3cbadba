"""Compiled bytecode inside a pyspark installation's ``pyspark.zip`` (and py4j's), for the test run's drivers.

spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on a Python driver's path, and Python
caches no bytecode for modules it imports from a zip: every driver compiled pyspark anew, about
0.85 CPU-s of its ~1.1 s of imports on this machine, a few hundred times a run. zipimport uses a
``.pyc`` entry beside a ``.py`` one when the archive has it: this adds one per module (unchecked
hash-based, so no timestamp has to match; a Python whose magic number differs skips them and
compiles the source as before). The ``.py`` entries stay, so tracebacks still show source lines.

Test tooling only, like the class-data-sharing archives (``tests/support/jvm.py``): the operator
never touches a Spark installation.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path


def compiled(path: Path) -> bool:
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith(".pyc") for name in archive.namelist())


def add_bytecode(path: Path) -> int:
    """Rewrites ``path`` with a ``.pyc`` beside every ``.py`` but pyspark's own tests'; returns how
    many it added."""
    added = 0
    descriptor, partial = tempfile.mkstemp(dir=path.parent, suffix=".partial")
    os.close(descriptor)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info, data)
            if info.filename.endswith(".py") and "/tests/" not in info.filename:
                with warnings.catch_warnings():  # pyspark's own SyntaxWarnings, as any compile of it shows
                    warnings.simplefilter("ignore")
                    code = compile(data, info.filename, "exec", dont_inherit=True)
                pyc = importlib._bootstrap_external._code_to_hash_pyc(  # type: ignore[attr-defined]
                    code, importlib.util.source_hash(data), checked=False
                )
                target.writestr(zipfile.ZipInfo(info.filename + "c", info.date_time), bytes(pyc))
                added += 1
    os.chmod(partial, path.stat().st_mode)
    # A new file, not a write into the old one: a venv's files may be hard links into uv's cache.
    os.replace(partial, path)
    return added


def ensure_compiled(python_lib: Path, lock_file: Path) -> None:
    """The zips of a pyspark installation's ``python/lib`` (``pyspark.zip``, py4j's), compiled once:
    under ``lock_file``, and before any driver of that installation starts (a zip rewritten under a
    running import fails it), so parallel test workers and the archive job do it once."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for path in sorted(python_lib.glob("*.zip")):
            if not compiled(path):
                print(f"tests: {add_bytecode(path)} modules compiled into {path}", file=sys.stderr)
