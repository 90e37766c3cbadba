"""Fetch the pinned jars of ``scripts/jars.lock`` from Maven once, verify them, keep them in a cache.

Spark gets these as local files (``jars`` / ``spark.jars``): nothing is downloaded while a task
runs, and a jar whose SHA-256 differs from the lock is refused. Maven (``mvn``) resolves and
downloads, so its repository settings (mirrors, proxies) apply; it runs only for a jar the cache
lacks, so a second setup starts no Maven at all.

    python3 scripts/fetch_jars.py                 # fetch what is missing, print the cache folder
    python3 scripts/fetch_jars.py --path G:A:V    # print one jar's local path (fetched if missing)
    python3 scripts/fetch_jars.py --select org.apache.hadoop:hadoop-aws software.amazon.  # spark.jars

A lock line is ``group:artifact:version[:classifier] sha256``; ``#`` starts a comment. Dependencies are not
resolved: every jar Spark needs is its own line, so the lock says exactly what runs.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

LOCK = Path(__file__).with_name("jars.lock")
CACHE = Path(os.environ.get("CTAS_JAR_CACHE", Path.home() / ".cache" / "airflow-provider-ctas" / "jars"))
MAVEN_REPOSITORY = Path(os.environ.get("CTAS_MAVEN_LOCAL", Path.home() / ".m2" / "repository"))
_COORDINATE = re.compile(r"^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z0-9_.+-]+(:[A-Za-z0-9_-]+)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class JarError(Exception):
    pass


@dataclass(frozen=True)
class Jar:
    coordinate: str
    sha256: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        """Group, artifact, version and classifier ("" for the main jar)."""
        group, artifact, version, *classifier = self.coordinate.split(":")
        return group, artifact, version, "".join(classifier)

    @property
    def file_name(self) -> str:
        _, artifact, version, classifier = self.parts
        return f"{artifact}-{version}{'-' + classifier if classifier else ''}.jar"


def read_lock(path: Path) -> list[Jar]:
    jars = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2 or not _COORDINATE.match(fields[0]) or not _SHA256.match(fields[1]):
            raise JarError(f"{path}:{number}: expected 'group:artifact:version[:classifier] sha256', got {raw!r}")
        jars.append(Jar(fields[0], fields[1]))
    return jars


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pom(jars: list[Jar], remote: str | None) -> str:
    """A project whose only purpose is to make Maven resolve ``jars`` (and nothing they depend on)."""
    dependencies = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        f"{f'<classifier>{c}</classifier>' if c else ''}"
        "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
        "</dependency>"
        for g, a, v, c in (jar.parts for jar in jars)
    )
    repositories = (
        f"<repositories><repository><id>ctas</id><url>{escape(remote)}</url></repository></repositories>"
        if remote
        else ""
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>airflow-provider-ctas</groupId><artifactId>fetch-jars</artifactId><version>0</version>"
        f"{repositories}<dependencies>{dependencies}</dependencies></project>"
    )


def _download(jars: list[Jar], into: Path = MAVEN_REPOSITORY) -> dict[Jar, Path]:
    """Let Maven resolve every jar into its local repository in one run (one JVM start, not one per
    jar); the caller checks each against the lock."""
    remote = os.environ.get("CTAS_MAVEN_REPOSITORY")  # another repository (a mirror; a test's own)
    with tempfile.TemporaryDirectory(prefix="fetch-jars-") as work:
        pom = Path(work, "pom.xml")
        pom.write_text(_pom(jars, remote))
        command = ["mvn", "-B", "-q", "-f", str(pom), "dependency:resolve", f"-Dmaven.repo.local={into}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    paths: dict[Jar, Path] = {}
    for jar in jars:
        group, artifact, version, _ = jar.parts
        path = into.joinpath(*group.split("."), artifact, version, jar.file_name)
        if not path.is_file():
            raise JarError(f"mvn could not fetch {jar.coordinate}:\n{(done.stdout + done.stderr)[-2000:]}")
        paths[jar] = path
    return paths


def _cached(jar: Jar, cache: Path) -> Path | None:
    target = cache / jar.file_name
    return target if target.is_file() and sha256(target) == jar.sha256 else None


def ensure(jars: list[Jar], cache: Path = CACHE) -> list[Path]:
    """The jars' paths in the cache; what is missing is fetched (one Maven run) and verified first."""
    missing = [jar for jar in jars if _cached(jar, cache) is None]
    if not missing:
        return [cache / jar.file_name for jar in jars]
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:  # parallel callers fetch once, one after the other
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [jar for jar in missing if _cached(jar, cache) is None]
        fetched = _download(missing) if missing else {}
        for jar in missing:
            actual = sha256(fetched[jar])
            if actual != jar.sha256:
                raise JarError(f"{jar.coordinate}: SHA-256 {actual} does not match the lock's {jar.sha256}; not kept")
            target = cache / jar.file_name
            partial = target.with_suffix(".partial")
            shutil.copyfile(fetched[jar], partial)
            partial.replace(target)
            print(f"fetch_jars: {jar.coordinate} -> {target}", file=sys.stderr)
    return [cache / jar.file_name for jar in jars]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lock", type=Path, default=LOCK)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--path", metavar="G:A:V", help="print the local path of this locked jar")
    parser.add_argument(
        "--select",
        nargs="+",
        metavar="PREFIX",
        help="print the local paths of the locked jars whose coordinates start with a PREFIX, comma-separated "
        "(what spark.jars takes)",
    )
    args = parser.parse_args(argv)
    try:
        jars = read_lock(args.lock)
        if args.path:
            chosen = [jar for jar in jars if jar.coordinate == args.path]
            if not chosen:
                raise JarError(f"{args.path} is not in {args.lock}")
            print(ensure(chosen, args.cache)[0])
            return 0
        if args.select:
            chosen = [jar for jar in jars if jar.coordinate.startswith(tuple(args.select))]
            if not chosen:
                raise JarError(f"no jar of {args.lock} starts with {' or '.join(args.select)}")
            print(",".join(str(path) for path in ensure(chosen, args.cache)))
            return 0
        ensure(jars, args.cache)
    except JarError as exc:
        print(f"fetch_jars: {exc}", file=sys.stderr)
        return 1
    print(args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
