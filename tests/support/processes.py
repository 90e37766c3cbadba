"""Find and really kill processes, for fault injection."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def wait_for_line(path: Path, line: str, timeout: float, count: int = 1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().splitlines().count(line) >= count:
            return
        time.sleep(0.1)
    seen = path.read_text(errors="replace").splitlines()[-15:] if path.exists() else ["(no such file)"]
    raise TimeoutError(
        f"{line!r} did not appear {count} time(s) in {path} within {timeout}s; its last lines:\n" + "\n".join(seen)
    )


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def find_processes(*needles: str) -> list[int]:
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and all(needle in cmdline(int(entry)) for needle in needles)
    ]


def kill_spark_driver(app_name_part: str) -> list[int]:
    """SIGKILL the spark-submit JVM (the driver in local/client mode) and its Python driver process."""
    jvms = find_processes("org.apache.spark.deploy.SparkSubmit", app_name_part)
    if not jvms:
        raise LookupError(f"no Spark driver whose command line mentions {app_name_part!r}")
    killed = []
    for jvm in jvms:
        for pid in [jvm, *children(jvm)]:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed
