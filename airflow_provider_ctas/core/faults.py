"""Fault injection for this provider's own test suite (``AIRFLOW_CTAS_FAULTS``); a no-op in production,
where the fault map is empty.

A fault is ``{point: {"sleep": s, "wait_for": path, "raise": text, "only_try": n, "only_target": t}}``
(``only_target``: the qualified table name of the run it applies to) plus an optional
``"progress_file"`` to which every reached point is appended as ``"<point> try=<n>"``, so a test can
act (kill a process) exactly there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_ctas.core.errors import PublishError


def inject(
    faults: Mapping[str, Any], point: str, try_number: int, say: Callable[[str], object], target: str | None = None
) -> None:
    spec = faults.get(point)
    if not isinstance(spec, dict):
        return
    only_try, only_target = spec.get("only_try"), spec.get("only_target")
    if (only_try is not None and only_try != try_number) or (only_target is not None and only_target != target):
        return
    progress_file = faults.get("progress_file")
    if isinstance(progress_file, str):
        with open(progress_file, "a") as handle:
            handle.write(f"{point} try={try_number}\n")
    if "sleep" in spec:
        say(f"fault injection at {point}: sleeping {spec['sleep']}s")
        time.sleep(float(spec["sleep"]))
    if "wait_for" in spec:
        say(f"fault injection at {point}: waiting for {spec['wait_for']}")
        deadline = time.monotonic() + 600
        while not os.path.exists(spec["wait_for"]) and time.monotonic() < deadline:
            time.sleep(0.2)
    if "raise" in spec:
        raise PublishError(f"injected fault at {point}: {spec['raise']}")
