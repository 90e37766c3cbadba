"""Where a cluster-mode driver on YARN waits for its task: the ResourceManager says on which host it
runs and which NodeManager serves its container's log; in that log the driver announced its port.

Only the worker opens connections (to the ResourceManager, the NodeManager's web port and the
driver's port), so a cluster that cannot reach the worker still has a decision path. The
ResourceManager's address and authentication are the apache-spark provider's: the Spark
connection's extra ``yarn_resourcemanager_webapp_address``, Kerberos where the connection has a
keytab (``SparkSubmitHook``'s REST tracking, which this mode uses too).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_provider_ctas.core.decision import announced_port
from airflow_provider_ctas.core.errors import DecisionPathError

ENDED = frozenset({"FINISHED", "FAILED", "KILLED"})
HTTP_SECONDS = 30
LIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"
TXN_TAG, TRY_TAG = "airflow-ctas-txn-", "airflow-ctas-try-"


def application_tags(txn_id: str, try_number: int) -> str:
    """``spark.yarn.tags`` of a try's application, by which a later try finds it in the ResourceManager."""
    return f"{TXN_TAG}{txn_id},{TRY_TAG}{try_number}"


def wait_for_earlier_tries(
    hook: SparkSubmitHook, txn_id: str, try_number: int, log: Callable[[str], None], every: float = 60.0
) -> list[str]:
    """Durable tries: follow the applications of this transaction's earlier tries that still run
    until they end, and return them. Such a driver lost its task and is finishing its write for the
    next try (``driver/phases.py``); this try's begin then takes that staging over instead of
    revoking it half-written. The task's own ``execution_timeout`` bounds the wait."""
    base, auth = hook._get_yarn_rm_base_url(), hook._resolved_yarn_rm_auth
    followed: list[str] = []
    started = last_said = time.monotonic()
    while True:
        url = f"{base}/ws/v1/cluster/apps?applicationTags={TXN_TAG}{txn_id}&states={LIVE_STATES}"
        apps = (_get(url, auth, what="the ResourceManager").json().get("apps") or {}).get("app") or []
        earlier = [app for app in apps if (_try_of(app) or try_number) < try_number]
        if not earlier:
            return followed
        for app in earlier:
            if app["id"] not in followed:
                followed.append(app["id"])
                log(
                    f"try {_try_of(app)}'s driver (YARN application {app['id']}, {app.get('state')}) is still "
                    "running; waiting for it to end before this try begins, to take over what it writes (durable=True)"
                )
        if time.monotonic() - last_said >= every:
            last_said = time.monotonic()
            log(f"still waiting for {', '.join(a['id'] for a in earlier)} ({last_said - started:.0f}s so far)")
        time.sleep(2)


def _try_of(app: dict[str, Any]) -> int | None:
    for tag in str(app.get("applicationTags") or "").split(","):
        if tag.startswith(TRY_TAG) and tag[len(TRY_TAG) :].isdigit():
            return int(tag[len(TRY_TAG) :])
    return None


def locate_driver(hook: SparkSubmitHook, txn_id: str, try_number: int, timeout: float) -> tuple[str, int]:
    """The host and port this try's driver listens on, once it announced them; raises
    DecisionPathError when the application ends first, or when nothing tells within ``timeout``."""
    app_id = hook._yarn_application_id
    if not app_id:
        raise DecisionPathError("spark-submit did not report a YARN application id")
    base, auth = hook._get_yarn_rm_base_url(), hook._resolved_yarn_rm_auth
    deadline, waiting = time.monotonic() + timeout, "the ResourceManager was not asked"
    while time.monotonic() < deadline:
        app = _get(f"{base}/ws/v1/cluster/apps/{app_id}", auth, what="the ResourceManager").json()["app"]
        state = app.get("state")
        if state in ENDED:
            raise DecisionPathError(
                f"YARN application {app_id} ended ({state}) before its driver listened: {app.get('diagnostics', '')}"
            )
        where = app.get("amRPCAddress"), app.get("amHostHttpAddress"), app.get("amContainerLogs")
        if state == "RUNNING" and all(where):
            host = str(where[0]).rsplit(":", 1)[0]
            container = str(where[2]).rstrip("/").split("/")[-2]
            scheme = base.split("://", 1)[0]
            log = _get(
                f"{scheme}://{where[1]}/ws/v1/node/containerlogs/{container}/stdout", auth, what="the NodeManager"
            ).text
            port = announced_port(log, txn_id=txn_id, try_number=try_number)
            if port is not None:
                return host, port
            waiting = f"the driver on {host} has not announced its port yet"
        else:
            waiting = f"the application is {state}"
        time.sleep(1)
    raise DecisionPathError(f"no driver of YARN application {app_id} to connect to within {timeout:.0f}s: {waiting}")


def _get(url: str, auth: Any, *, what: str) -> requests.Response:
    try:
        response = requests.get(url, auth=auth, timeout=HTTP_SECONDS)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise DecisionPathError(
            f"{what} did not answer from this worker ({url}): {exc}; cluster deploy mode needs the worker to "
            "reach the ResourceManager's and NodeManagers' web ports and the driver's host"
        ) from exc
    return response
