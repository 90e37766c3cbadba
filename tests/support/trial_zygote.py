"""Tries started by forking a warmed process: ``python -m tests.support.trial_zygote SOCKET``.

A try (``tests/support/trial.py``) is its own process so that a test can kill it, and most of its
start is Airflow's, not the provider's: importing Airflow (~3 CPU-s here) and building and first
calling the in-process execution API that ``dag.test()`` runs tasks against (~8 CPU-s: the API's
versioned routes are generated on its first request). This process pays that once per test worker,
then forks one child per try. The child gets its own session (process group), the test's current
environment, its log file as stdout and stderr, a fresh transport to the API (the warmed app, a new
event loop: threads do not survive a fork) and fresh database connections; then it runs exactly what
``python -m tests.support.trial`` runs. Test tooling only: the operator never runs like this.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.trial import run_one_try

REPO = Path(__file__).resolve().parents[2]


def _warm() -> None:
    import httpx
    from a2wsgi import ASGIMiddleware
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    app = in_process_api_server().app
    # A throwaway transport, not the API's own (a cached one would be a dead loop in every child).
    transport = httpx.WSGITransport(app=ASGIMiddleware(app))  # type: ignore[arg-type] # as Airflow's own
    with httpx.Client(transport=transport, base_url="http://warm.invalid") as client:
        client.get("/execution/")


def _child(request: dict[str, Any]) -> None:
    """Runs in the forked child; never returns."""
    code = 1
    try:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.clear()
        os.environ.update(request["env"])
        from airflow import settings

        if settings.engine is not None:
            settings.engine.dispose(close=False)  # the zygote's pooled connections are not this process's
        state = run_one_try(*request["args"])
        print(f"TRIAL_STATE {state}", flush=True)
        code = 0 if state == "success" else 1
    except BaseException as exc:
        print(f"trial_zygote: the try failed to run: {exc!r}", file=sys.stderr, flush=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: str) -> None:
    parent = os.getppid()
    _warm()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    server.listen(8)
    os.rename(path + ".tmp", path)  # ready
    while True:
        while True:  # reap finished tries
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if os.getppid() != parent:
            return  # the test worker is gone
        if not select.select([server], [], [], 1.0)[0]:
            continue
        connection, _ = server.accept()
        with connection:
            request = json.loads(connection.makefile("r").readline())
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                server.close()
                connection.close()
                _child(request)
            connection.sendall(f"{pid}\n".encode())


class Zygote:
    """The test worker's side: one zygote per worker, started by the first try that asks for it."""

    _instance: Zygote | None = None

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="ctas-zygote-")
        self.path = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.trial_zygote", self.path],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.folder, "zygote.log"), "ab"),  # noqa: SIM115 - the child's
            start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + 300
        while not os.path.exists(self.path):
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = open(os.path.join(self.folder, "zygote.log"), errors="replace").read()[-3000:]  # noqa: SIM115
                raise RuntimeError(f"the try zygote did not start within 300 s: {log}")
            time.sleep(0.1)

    @classmethod
    def shared(cls) -> Zygote:
        if cls._instance is None or cls._instance.process.poll() is not None:
            cls._instance = cls()
        return cls._instance

    def fork(self, args: list[str], env: dict[str, str], log: str) -> int:
        """Start one try; its pid (also its process group)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(self.path)
            client.sendall((json.dumps({"args": args, "env": env, "log": log}) + "\n").encode())
            return int(client.makefile("r").readline())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    serve(sys.argv[1])
