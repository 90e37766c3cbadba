"""The operator's extra link: the Spark application a try ran as."""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseOperatorLink


class SupersededTryError(Exception):
    """The try asking for its link is fenced off by a newer one."""


class SparkApplicationLink(BaseOperatorLink):
    """The application's page on the Spark History Server when the driver has one configured
    (``spark.yarn.historyServer.address`` with event logs on), else its live UI, as the driver
    reported them in begin.

    Airflow 3 asks for the link in the worker when the task ends and stores it in XCom, so the
    live operator's transaction is at hand. The live UI serves only while the application runs,
    which has ended by the time anyone clicks the link; the History Server's page stays. A Connect
    server's UI is not visible to its clients (no link then).
    """

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        if getattr(operator, "_superseded", False):
            # Raising is how a link is left unrecorded: the newer try's stays (Airflow logs this).
            raise SupersededTryError("a newer try of this task instance has begun; this try records no link")
        table = getattr(operator, "_txn", None)
        application = (table.details.get("spark_application") if table is not None else None) or {}
        return str(application.get("history") or application.get("ui") or "")
