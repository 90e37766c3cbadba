"""The profile's reading of py-spy's raw stacks: only the driver's main thread counts, each function once per sample."""

from __future__ import annotations

from tests.support.benchmarks import load

profile = load("profile_phases")

TASK = 'process 1:"python one_run.py atomic_create"'
SUBMIT = 'process 2:"bash spark-class SparkSubmit --py-files x.zip airflow_ctas_app.py request.json"'
DRIVER = 'process 3:"python airflow_provider_ctas/driver/airflow_ctas_app.py request.json"'
ENTRY = "<module> (airflow_provider_ctas/driver/airflow_ctas_app.py:19)"


def stack(*frames: str, samples: int) -> str:
    return ";".join(frames) + f" {samples}"


def test_driver_functions_are_counted_inclusively_and_other_processes_are_not(tmp_path):
    raw = tmp_path / "run.raw"
    raw.write_text(
        "\n".join(
            [
                stack(TASK, "_submit (spark_submit.py:212)", samples=500),
                stack(
                    TASK,
                    SUBMIT,
                    DRIVER,
                    ENTRY,
                    "main (app.py:81)",
                    "begin (begin.py:42)",
                    "Catalog.databaseExists (catalog.py:636)",
                    "GatewayClient.send_command (java_gateway.py:1038)",
                    samples=100,
                ),
                stack(
                    TASK,
                    SUBMIT,
                    DRIVER,
                    ENTRY,
                    "main (app.py:81)",
                    "begin (begin.py:60)",
                    "_create_staging (begin.py:190)",
                    samples=50,
                ),
                stack(TASK, SUBMIT, DRIVER, "Thread.run (threading.py:982)", "serve (accumulators.py:1)", samples=900),
            ]
        )
    )
    seconds, functions = profile.driver_profile(raw)
    assert seconds == 150 / profile.RATE
    by_name = dict(functions)
    assert by_name["main (app.py)"] == 150 / profile.RATE
    assert by_name["begin (begin.py)"] == 150 / profile.RATE  # two lines of one function: counted once per sample
    assert by_name["Catalog.databaseExists (catalog.py)"] == 100 / profile.RATE
    assert by_name["_create_staging (begin.py)"] == 50 / profile.RATE
    assert "GatewayClient.send_command (java_gateway.py)" not in by_name  # py4j plumbing
    assert "_submit (spark_submit.py)" not in by_name and "serve (accumulators.py)" not in by_name


def test_the_report_carries_its_history_row(monkeypatch):
    from ctas_devstack import reports

    monkeypatch.setattr(profile.bench, "memory_gib", lambda: 24.0)
    profiles = [
        {"approach": "atomic_replace_flip", "rows": 1000000, "phases": {"begin": 3.44, "prepare": 4.0, "commit": 0.5},
         "driver_seconds": 12.31, "functions": [("main (app.py)", 12.18)]},
        {"approach": "atomic_overwrite_partitions", "rows": 1000000, "phases": {"begin": 3.58, "commit": 0.84},
         "driver_seconds": 14.0, "functions": []},
    ]  # fmt: skip
    text = profile.render(profiles, shown=10, commit="9161037")
    row = reports.entry(text)
    assert row is not None
    cells = row.strip("| ").split(" | ")
    assert cells[1:] == [
        "9161037",
        "1e6",
        "atomic_replace_flip: begin 3.44, prepare 4.00, commit 0.50; driver 12.3<br>"
        "atomic_overwrite_partitions: begin 3.58, commit 0.84; driver 14.0",
    ]
    assert cells[0] == reports.stamp(text.split("\nRun ", 1)[1].split(" on ", 1)[0])
