"""The package zip that spark-submit ships: a driver on the worker's Python imports the compiled
modules, and one on another Python (another magic number) the sources."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from airflow_provider_ctas.runners.spark_submit import PACKAGE_CACHE_PREFIX, package_zip

MODULE = "airflow_provider_ctas.core.errors"


def imported_from(archive: Path) -> str:
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import {MODULE} as m; print(m.__file__)"
    return subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout


def test_a_driver_on_the_same_python_imports_the_compiled_modules(tmp_path: Path) -> None:
    archive = Path(package_zip(str(tmp_path)))
    assert imported_from(archive).strip().endswith("airflow_provider_ctas/core/errors.pyc")


def test_a_driver_on_another_python_imports_the_sources(tmp_path: Path) -> None:
    archive = Path(package_zip(str(tmp_path)))
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(other, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith(".pyc"):
                data = b"\x00\x00\r\n" + data[4:]  # a magic number no Python has
            target.writestr(info, data)
    assert imported_from(other).strip().endswith("airflow_provider_ctas/core/errors.py")


def test_the_zip_is_built_once_per_package_content_in_a_private_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first = Path(package_zip(str(tmp_path / "task1")))
    assert first.parent == tmp_path / f"{PACKAGE_CACHE_PREFIX}{os.getuid()}"
    assert stat.S_IMODE(first.parent.stat().st_mode) == 0o700
    built = first.stat().st_mtime_ns
    assert package_zip(str(tmp_path / "task2")) == str(first) and first.stat().st_mtime_ns == built
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
    assert "airflow_provider_ctas/core/errors.pyc" in names and "airflow_provider_ctas/core/errors.py" in names


def test_a_folder_others_can_write_into_is_not_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / f"{PACKAGE_CACHE_PREFIX}{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    task = tmp_path / "task"
    task.mkdir()
    assert Path(package_zip(str(task))).parent == task
