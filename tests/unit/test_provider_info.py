from __future__ import annotations

from importlib.metadata import entry_points

from airflow_provider_ctas import __version__
from airflow_provider_ctas.provider_info import get_provider_info


def test_entry_point_points_at_provider_info():
    found = [
        ep
        for ep in entry_points(group="apache_airflow_provider")
        if ep.dist and ep.dist.name == "airflow-provider-ctas"
    ]
    assert len(found) == 1
    assert found[0].load() is get_provider_info


def test_provider_info_lists_the_operator():
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-ctas"
    assert info["versions"] == [__version__]
    modules = info["operators"][0]["python-modules"]
    assert modules == ["airflow_provider_ctas.operators.atomic_ctas", "airflow_provider_ctas.operators.gc"]
    for module in modules:
        __import__(module)


def test_provider_info_validates_against_airflows_schema():
    import json
    from pathlib import Path

    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)
