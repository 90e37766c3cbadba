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
    assert modules == [
        "airflow_provider_ctas.operators.atomic_ctas",
        "airflow_provider_ctas.operators.gc",
        "airflow_provider_ctas.operators.publish_group",
    ]
    for module in modules:
        __import__(module)


def test_provider_info_validates_against_airflows_schema():
    import json
    from pathlib import Path

    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_gc_is_an_airflow_cli_command_with_clear_errors(capsys):
    from datetime import timedelta
    from types import SimpleNamespace

    import pytest

    from airflow_provider_ctas.cli import gc_command, get_cli_commands
    from airflow_provider_ctas.gc import parse_duration
    from airflow_provider_ctas.provider_info import get_provider_info

    assert get_provider_info()["cli"] == ["airflow_provider_ctas.cli.get_cli_commands"]
    (group,) = get_cli_commands()
    assert (group.name, [c.name for c in group.subcommands]) == ("ctas", ["gc"])
    assert parse_duration("2w") == timedelta(weeks=2) and parse_duration("90s") == timedelta(seconds=90)
    args = SimpleNamespace(database=["analytics"], conn_id="spark_default", min_age="1y", dry_run=True, json=False)
    with pytest.raises(SystemExit) as exited:
        gc_command(args)  # type: ignore[arg-type]
    assert exited.value.code == 2
    assert "[INVALID_INPUT] duration '1y' is not a number with an optional unit" in capsys.readouterr().err
    args = SimpleNamespace(database=["analytics"], conn_id="spark_default", min_age="1h", dry_run=True, json=False,
                           conf=["spark.sql.catalog.lake"], catalog="lake")  # fmt: skip
    with pytest.raises(SystemExit):
        gc_command(args)  # type: ignore[arg-type]
    assert "--conf 'spark.sql.catalog.lake' is not KEY=VALUE" in capsys.readouterr().err
    args.conf, args.catalog = ["a=b=c"], "lake; rm -rf /"
    with pytest.raises(SystemExit):
        gc_command(args)  # type: ignore[arg-type]
    assert "[INVALID_INPUT] catalog" in capsys.readouterr().err, "refused before any Spark work"
