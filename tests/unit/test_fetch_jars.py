"""scripts/fetch_jars.py: pinned jars from a Maven repository, verified, fetched once.

The Maven test runs the real ``mvn`` against a repository in a temporary folder (a ``file:`` URL),
so it needs no network beyond Maven's own plugins.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "fetch_jars.py"
sys.path.insert(0, str(SCRIPT.parent))
import fetch_jars  # type: ignore[import-not-found]  # noqa: E402


def run(lock: Path, cache: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--lock", str(lock), "--cache", str(cache), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def test_lock_lines_are_validated(tmp_path):
    lock = tmp_path / "jars.lock"
    lock.write_text("# comment\n\norg.a:b:1.0 " + "ab" * 32 + "  # trailing comment\n")
    assert fetch_jars.read_lock(lock) == [fetch_jars.Jar("org.a:b:1.0", "ab" * 32)]
    for bad in ("org.a:b:1.0", "org.a:b " + "ab" * 32, "org.a:b:1.0 XYZ", "org.a:b:1;rm -rf / " + "ab" * 32):
        lock.write_text(bad + "\n")
        with pytest.raises(fetch_jars.JarError, match=r"expected 'group:artifact:version\[:classifier\] sha256'"):
            fetch_jars.read_lock(lock)


@pytest.mark.integration
def test_fetches_once_verifies_and_refuses_a_wrong_checksum(tmp_path):
    group = f"test.airflowctas.g{uuid.uuid4().hex[:8]}"
    remote = tmp_path / "remote"
    folder = remote.joinpath(*group.split("."), "probe", "1.0")
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "probe-1.0.jar", "w") as jar:
        jar.writestr("probe.txt", group)
    (folder / "probe-1.0.pom").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>{group}</groupId><artifactId>probe</artifactId><version>1.0</version></project>"
    )
    digest = hashlib.sha256((folder / "probe-1.0.jar").read_bytes()).hexdigest()
    local = Path.home() / ".m2" / "repository" / group.split(".")[0] / group.split(".")[1] / group.split(".")[2]
    env = {"CTAS_MAVEN_REPOSITORY": remote.as_uri()}
    lock, cache = tmp_path / "jars.lock", tmp_path / "cache"
    try:
        lock.write_text(f"{group}:probe:1.0 {'0' * 64}\n")
        refused = run(lock, cache, env=env)
        assert refused.returncode == 1
        assert f"SHA-256 {digest} does not match" in refused.stderr
        assert not (cache / "probe-1.0.jar").exists()

        lock.write_text(f"{group}:probe:1.0 {digest}\n")
        fetched = run(lock, cache, env=env)
        assert fetched.returncode == 0, fetched.stderr
        assert hashlib.sha256((cache / "probe-1.0.jar").read_bytes()).hexdigest() == digest

        # Neither the remote nor Maven's copy is needed again: the cache answers, and mvn is not run.
        shutil.rmtree(remote)
        shutil.rmtree(local)
        again = run(lock, cache, "--path", f"{group}:probe:1.0", env={**env, "PATH": "/nonexistent"})
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == str(cache / "probe-1.0.jar")
    finally:
        shutil.rmtree(local, ignore_errors=True)
