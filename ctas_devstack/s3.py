"""An S3-compatible object store on 127.0.0.1 for development and tests: moto's S3 in server mode
(the same process serves AWS Glue's Data Catalog: ``glue.py``).

A real HTTP server in its own process (path-style addressing, multipart uploads, copies), which
Spark reaches through Hadoop's S3A connector (``hadoop-aws`` and the AWS SDK jars of
``scripts/jars.lock``). Every request it serves is appended to ``requests.jsonl`` under its root:
method, path, query and ``x-amz-copy-source`` (what a server-side copy carries), so a test or a
benchmark can count the copies a publish made.

    python -m ctas_devstack.s3 start --root .ctas-local/s3 [--port 9000]
    python -m ctas_devstack.s3 stop --root .ctas-local/s3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctas_devstack.jars import locked_jars
from ctas_devstack.metastore import free_port, wait_for_port

ACCESS_KEY = "ctas-dev-access-key"
SECRET_KEY = "ctas-dev-secret-key-never-logged"  # noqa: S105 - a local test server's, by design
"""moto accepts any credentials; these are fixed so tests can look for the secret in logs and XCom."""

S3_JARS = ("org.apache.hadoop:hadoop-aws", "software.amazon.", "org.reactivestreams:reactive-streams")
"""What of scripts/jars.lock Spark needs for s3a:// (hadoop-aws matches pyspark's Hadoop, 3.5.0)."""
REPO = Path(__file__).resolve().parents[1]


def s3_jars() -> list[str]:
    """Local paths of the S3A jars (fetched and verified by scripts/fetch_jars.py if missing)."""
    return locked_jars(*S3_JARS)


def hadoop_conf_for(endpoint: str) -> dict[str, str]:
    """``fs.s3a.*`` settings for a server of this module at ``endpoint`` (its fixed credentials)."""
    return {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": ACCESS_KEY,
        "fs.s3a.secret.key": SECRET_KEY,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.change.detection.version.required": "false",
    }


class S3Server:
    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root.resolve()
        self.port = port or free_port()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.root / "s3.pid"

    @property
    def request_log(self) -> Path:
        return self.root / "requests.jsonl"

    def start(self, timeout: float = 60) -> S3Server:
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "s3.log", "ab")  # noqa: SIM115 - handed to the child
        command = ["serve", "--port", str(self.port), "--log", str(self.request_log)]
        process = subprocess.Popen(
            [sys.executable, "-m", "ctas_devstack.s3", *command],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.root,
        )
        self.pid_file.write_text(str(process.pid))
        wait_for_port(self.port, timeout, process)
        return self

    def stop(self) -> None:
        if not self.pid_file.exists():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(self.pid_file.read_text()), signal.SIGTERM)
        self.pid_file.unlink(missing_ok=True)

    def hadoop_conf(self) -> dict[str, str]:
        """``fs.s3a.*`` settings for this server (prefix them with ``spark.hadoop.`` for Spark)."""
        return hadoop_conf_for(self.endpoint)

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def requests(self) -> list[dict[str, Any]]:
        if not self.request_log.exists():
            return []
        return [json.loads(line) for line in self.request_log.read_text().splitlines() if line.strip()]


def logging_app(app: Callable[..., Iterable[bytes]], log: Path) -> Callable[..., Iterable[bytes]]:
    from ctas_devstack.glue import glue_request

    lock = threading.Lock()

    def logged(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        entry = {
            "at": time.time(),
            "method": environ.get("REQUEST_METHOD"),
            "path": environ.get("PATH_INFO"),
            "query": environ.get("QUERY_STRING", ""),
            "copy_source": environ.get("HTTP_X_AMZ_COPY_SOURCE"),
            **(glue_request(environ) or {}),
        }
        with lock, log.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
        return app(environ, start_response)

    return logged


def serve(port: int, log: Path) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app  # type: ignore[attr-defined]
    from werkzeug.serving import run_simple

    from ctas_devstack.glue import enforce_version_ids

    enforce_version_ids()
    app = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", port, logging_app(app, log), threaded=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start")
    start.add_argument("--root", type=Path, required=True)
    start.add_argument("--port", type=int)
    stop = sub.add_parser("stop")
    stop.add_argument("--root", type=Path, required=True)
    run = sub.add_parser("serve", help="run in the foreground (what start runs)")
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--log", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.port, args.log)
    elif args.command == "start":
        server = S3Server(args.root, args.port).start()
        print(f"S3 endpoint {server.endpoint} (access key {ACCESS_KEY}); requests logged to {server.request_log}")
    else:
        S3Server(args.root).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
