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
from typing import Any

import requests
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_provider_ctas.core.decision import announced_port
from airflow_provider_ctas.core.errors import DecisionPathError

ENDED = frozenset({"FINISHED", "FAILED", "KILLED"})
HTTP_SECONDS = 30


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
