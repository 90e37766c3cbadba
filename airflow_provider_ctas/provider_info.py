"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_ctas import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-ctas",
        "name": "Atomic CTAS",
        "description": "Atomic CREATE TABLE AS SELECT on Apache Spark, driven by the task lifecycle.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Atomic CTAS",
                "external-doc-url": "https://github.com/airflow-provider-ctas/airflow-provider-ctas",
                "tags": ["apache"],
            }
        ],
        "asset-uris": [
            {
                "schemes": ["hive"],
                "handler": "airflow_provider_ctas.operators.assets.sanitize_uri",
                "factory": "airflow_provider_ctas.operators.assets.create_asset",
                "to_openlineage_converter": "airflow_provider_ctas.operators.assets.convert_asset_to_openlineage",
            }
        ],
        # Airflow 3.2+: `airflow ctas gc`.
        "cli": ["airflow_provider_ctas.cli.get_cli_commands"],
        "operators": [
            {
                "integration-name": "Atomic CTAS",
                "python-modules": [
                    "airflow_provider_ctas.operators.atomic_ctas",
                    "airflow_provider_ctas.operators.gc",
                    "airflow_provider_ctas.operators.publish_group",
                ],
            }
        ],
    }
