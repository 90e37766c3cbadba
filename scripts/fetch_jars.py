"""Fetch the pinned jars of ``scripts/jars.lock`` from Maven once, verify them, keep them in a cache.

Spark gets these as local files (``jars`` / ``spark.jars``): nothing is downloaded while a task
runs, and a jar whose SHA-256 differs from the lock is refused. Maven (``mvn``) resolves and
downloads, so its repository settings (mirrors, proxies) apply; it runs only for a jar the cache
lacks, so a second setup starts no Maven at all.

    python3 scripts/fetch_jars.py                 # fetch what is missing, print the cache folder
    python3 scripts/fetch_jars.py --path G:A:V    # print one jar's local path (fetched if missing)

A lock line is ``group:artifact:version sha256``; ``#`` starts a comment. Dependencies are not
resolved: every jar Spark needs is its own line, so the lock says exactly what runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LOCK = Path(__file__).with_name("jars.lock")
CACHE = Path(os.environ.get("CTAS_JAR_CACHE", Path.home() / ".cache" / "airflow-provider-ctas" / "jars"))
MAVEN_REPOSITORY = Path(os.environ.get("CTAS_MAVEN_LOCAL", Path.home() / ".m2" / "repository"))
_COORDINATE = re.compile(r"^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z0-9_.+-]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class JarError(Exception):
    pass


@dataclass(frozen=True)
class Jar:
    coordinate: str
    sha256: str

    @property
    def file_name(self) -> str:
        _, artifact, version = self.coordinate.split(":")
        return f"{artifact}-{version}.jar"


def read_lock(path: Path) -> list[Jar]:
    jars = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2 or not _COORDINATE.match(fields[0]) or not _SHA256.match(fields[1]):
            raise JarError(f"{path}:{number}: expected 'group:artifact:version sha256', got {raw!r}")
        jars.append(Jar(fields[0], fields[1]))
    return jars


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(jar: Jar, into: Path = MAVEN_REPOSITORY) -> Path:
    """Let Maven resolve the jar into its local repository; the caller checks it against the lock."""
    command = ["mvn", "-B", "-q", "dependency:get", f"-Dartifact={jar.coordinate}", "-Dtransitive=false"]
    command.append(f"-Dmaven.repo.local={into}")
    remote = os.environ.get("CTAS_MAVEN_REPOSITORY")  # another repository (a mirror; a test's own)
    if remote:
        command.append(f"-DremoteRepositories=ctas::default::{remote}")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    group, artifact, version = jar.coordinate.split(":")
    path = into.joinpath(*group.split("."), artifact, version, jar.file_name)
    if done.returncode != 0 or not path.is_file():
        raise JarError(f"mvn could not fetch {jar.coordinate}:\n{(done.stdout + done.stderr)[-2000:]}")
    return path


def ensure(jar: Jar, cache: Path = CACHE) -> Path:
    """The jar's path in the cache, fetched and verified first if it is not there yet."""
    target = cache / jar.file_name
    if target.is_file() and sha256(target) == jar.sha256:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    fetched = _download(jar)
    actual = sha256(fetched)
    if actual != jar.sha256:
        raise JarError(f"{jar.coordinate}: SHA-256 {actual} does not match the lock's {jar.sha256}; not kept")
    partial = target.with_suffix(".partial")
    shutil.copyfile(fetched, partial)
    partial.replace(target)
    print(f"fetch_jars: {jar.coordinate} -> {target}", file=sys.stderr)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lock", type=Path, default=LOCK)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--path", metavar="G:A:V", help="print the local path of this locked jar")
    args = parser.parse_args(argv)
    try:
        jars = read_lock(args.lock)
        if args.path:
            chosen = [jar for jar in jars if jar.coordinate == args.path]
            if not chosen:
                raise JarError(f"{args.path} is not in {args.lock}")
            print(ensure(chosen[0], args.cache))
            return 0
        for jar in jars:
            ensure(jar, args.cache)
    except JarError as exc:
        print(f"fetch_jars: {exc}", file=sys.stderr)
        return 1
    print(args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
