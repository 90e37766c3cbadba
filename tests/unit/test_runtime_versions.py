"""What the phases and the operators refuse to run on, and what they only warn about."""

import subprocess
from pathlib import Path

import pytest

from airflow_provider_ctas.core.errors import UnsupportedSparkError
from airflow_provider_ctas.operators.airflow_version import require_airflow
from airflow_provider_ctas.runners.spark_submit import APPLICATION
from airflow_provider_ctas.spark.runtime import check_spark


@pytest.mark.parametrize("spark", ["3.4.4", "3.3.0", "2.4.8", "5.0.0", "6.1.0-preview1"])
def test_unsupported_spark_is_refused(spark):
    expected = f"Spark {spark} is not supported: .* runs on Spark 3.5 and 4.x"
    with pytest.raises(UnsupportedSparkError, match=expected) as raised:
        check_spark(spark)
    assert not raised.value.retryable


def test_tested_spark_passes_and_untested_warns():
    for tested in ("3.5.6", "4.0.5", "4.1.4", "4.3.0", "4.3.1-SNAPSHOT"):
        assert check_spark(tested) is None
    assert check_spark("4.2.1") == "Spark 4.2.1 is untested with this release (tested: 3.5, 4.0, 4.1, 4.3)"
    assert check_spark("weird") == "Spark version 'weird' not understood; assuming it is supported"


def test_airflow_older_than_tested_is_refused_at_import():
    require_airflow("3.3.2")
    require_airflow("3.4.0.dev0")
    with pytest.raises(RuntimeError, match=r"needs Apache Airflow 3\.3\.2\+ .*this is Airflow 3\.3\.1"):
        require_airflow("3.3.1")


def _older_pythons() -> list[Path]:
    """Interpreters 3.6-3.10 that pyenv keeps on this machine (none elsewhere is assumed)."""
    found = Path.home().glob(".pyenv/versions/3.*/bin/python")
    return [python for python in found if 6 <= int(python.parent.parent.name.split(".")[1]) < 11]


def test_the_driver_entry_point_refuses_an_older_python_by_name():
    """Run the real entry script on a real older interpreter: it must say what is wrong before the
    package (3.11 syntax) fails to import with a bare SyntaxError."""
    pythons = _older_pythons()
    if not pythons:
        pytest.skip("no Python older than 3.11 on this machine")
    for python in pythons:
        done = subprocess.run([str(python), APPLICATION, "request.json"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3, (python, done.stderr)
        assert "the Spark driver runs Python 3." in done.stderr and "needs 3.11 or newer" in done.stderr
