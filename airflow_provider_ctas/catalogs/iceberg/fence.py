"""The fences a try raises on a replaced Iceberg table: one table property per try that began,
``airflow_ctas.fence.<txn_id>.<try>``, whose value records when it began and for which task
instance (JSON, what GC needs to tell a killed try's branch from a running one's).

One key per try, never one key that each try overwrites: a REST catalog applies property changes
key by key on whatever metadata is current when the commit lands (its requirements cover refs,
schemas and specs, not properties), so an older try whose begin lands late would otherwise put its
own number back over a newer try's. With a key per try, "a newer try began" is the presence of a
higher key, whatever order the commits landed in. Tables written by earlier releases carry
``airflow_ctas.fence.<txn_id>`` (the try number) with ``airflow_ctas.fence_begun.<txn_id>``; both are
read and removed here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_ctas.core.identifiers import PROVIDER_PROPERTY_PREFIX

FENCE_PREFIX = PROVIDER_PROPERTY_PREFIX + "fence."
LEGACY_BEGUN_PREFIX = PROVIDER_PROPERTY_PREFIX + "fence_begun."
PREPARED_PREFIX = PROVIDER_PROPERTY_PREFIX + "prepared."
"""``prepared.<txn_id>.<try>``: with ``durable=True``, the record of the branch that try holds for the
next one (``adoption.py``); it goes wherever the try's fence goes."""


def fence_key(txn_id: str, try_number: int) -> str:
    return f"{FENCE_PREFIX}{txn_id}.{try_number}"


def begun_record(began_at: str, task: Mapping[str, Any]) -> str:
    return json.dumps({"begun_at": began_at, "task": dict(task)}, sort_keys=True)


def _parse(key: str, value: str) -> tuple[str, int] | None:
    rest = key[len(FENCE_PREFIX) :]
    txn_id, _, try_text = rest.partition(".")
    if try_text:
        return (txn_id, int(try_text)) if try_text.isdigit() else None
    return (txn_id, int(value)) if value.isdigit() else None  # an earlier release's single key


def all_fences(props: Mapping[str, str]) -> dict[str, dict[int, str]]:
    """Per transaction, the tries that raised a fence with the property key each one lives under."""
    found: dict[str, dict[int, str]] = {}
    for key, value in props.items():
        if key.startswith(FENCE_PREFIX) and (parsed := _parse(key, value)) is not None:
            found.setdefault(parsed[0], {})[parsed[1]] = key
    return found


def tries(props: Mapping[str, str], txn_id: str) -> dict[int, str]:
    return all_fences(props).get(txn_id, {})


def newest(props: Mapping[str, str], txn_id: str) -> int | None:
    raised = tries(props, txn_id)
    return max(raised) if raised else None


def began(props: Mapping[str, str], txn_id: str, try_number: int) -> dict[str, Any]:
    """When ``try_number`` began and for which task instance; {} when unrecorded or unreadable."""
    key = tries(props, txn_id).get(try_number)
    text = props.get(key or "", "")
    if key == FENCE_PREFIX + txn_id:
        text = props.get(LEGACY_BEGUN_PREFIX + txn_id, "")
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def prepared_key(txn_id: str, try_number: int) -> str:
    return f"{PREPARED_PREFIX}{txn_id}.{try_number}"


def prepared(props: Mapping[str, str], txn_id: str) -> dict[int, str]:
    """Per try, the prepared record it left (its text, unparsed)."""
    prefix, found = f"{PREPARED_PREFIX}{txn_id}.", {}
    for key, value in props.items():
        if key.startswith(prefix) and key[len(prefix) :].isdigit():
            found[int(key[len(prefix) :])] = value
    return found


def keys_of(props: Mapping[str, str], txn_id: str, up_to: int | None = None) -> list[str]:
    """The property keys of the transaction's fences and prepared records (of tries ``<= up_to``
    when given), with an earlier release's begin record beside its fence."""
    keys = [key for number, key in tries(props, txn_id).items() if up_to is None or number <= up_to]
    if FENCE_PREFIX + txn_id in keys and LEGACY_BEGUN_PREFIX + txn_id in props:
        keys.append(LEGACY_BEGUN_PREFIX + txn_id)
    keys += [prepared_key(txn_id, n) for n in prepared(props, txn_id) if up_to is None or n <= up_to]
    return sorted(keys)
