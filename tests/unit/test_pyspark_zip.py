from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.pyspark_zip import add_bytecode, compiled


def _archive(tmp_path: Path) -> Path:
    path = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/mod.py", "VALUE = 42\n")
        archive.writestr("pkg/tests/test_mod.py", "VALUE = 1\n")
        archive.writestr("pkg/data.txt", "kept")
    return path


def _imported_from(path: Path, module: str) -> str:
    code = f"import sys; sys.path.insert(0, {str(path)!r}); import {module} as m; print(m.__file__, m.VALUE)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_modules_import_from_their_bytecode_and_everything_else_is_kept(tmp_path):
    path = _archive(tmp_path)
    assert not compiled(path)
    assert _imported_from(path, "pkg.mod").split()[0].endswith("mod.py")

    assert add_bytecode(path) == 2  # pkg/__init__.py and pkg/mod.py; not pyspark's own tests
    assert compiled(path)
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        assert archive.read("pkg/data.txt") == b"kept"
    assert {"pkg/mod.py", "pkg/mod.pyc", "pkg/tests/test_mod.py", "pkg/data.txt"} <= names
    assert "pkg/tests/test_mod.pyc" not in names
    file, value = _imported_from(path, "pkg.mod").split()
    assert (file.endswith("mod.pyc"), value) == (True, "42")


def test_a_python_that_cannot_read_the_bytecode_compiles_the_source(tmp_path):
    path = _archive(tmp_path)
    add_bytecode(path)
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    entries["pkg/mod.pyc"] = b"\x00\x00\x00\x00" + entries["pkg/mod.pyc"][4:]  # another magic number
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    file, value = _imported_from(path, "pkg.mod").split()
    assert (file.endswith("mod.py"), value) == (True, "42")
