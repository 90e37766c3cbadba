"""A pyspark whose Python files another release overwrote is refused before spark-submit."""

from importlib import metadata
from pathlib import Path

import pytest

from airflow_provider_ctas.core.errors import SparkInstallError
from airflow_provider_ctas.runners.pyspark_install import check_pyspark_install, files_version


def _site(tmp_path: Path, dist_version: str, files: str | None) -> metadata.Distribution:
    info = tmp_path / f"pyspark-{dist_version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pyspark\nVersion: {dist_version}\n")
    if files is not None:
        (tmp_path / "pyspark").mkdir()
        # As pyspark 4.x writes it.
        (tmp_path / "pyspark" / "version.py").write_text(f"#!/usr/bin/env python3\n\n__version__: str = '{files}'\n")
    return metadata.PathDistribution(info)


def test_files_of_another_release_are_refused_with_the_fix(tmp_path):
    dist = _site(tmp_path, "4.3.0", "4.2.0")
    with pytest.raises(SparkInstallError) as raised:
        check_pyspark_install(dist)
    assert raised.value.code == "PYSPARK_INSTALL_MIXED" and not raised.value.retryable
    assert "pyspark 4.3.0 is installed, but its Python files are those of 4.2.0" in str(raised.value)
    assert "pip install --force-reinstall --no-deps 'pyspark==4.3.0'" in str(raised.value)


def test_a_consistent_install_passes(tmp_path):
    dist = _site(tmp_path, "4.3.0", "4.3.0")
    assert files_version(dist) == "4.3.0"
    check_pyspark_install(dist)


def test_unreadable_version_file_is_not_a_verdict(tmp_path):
    check_pyspark_install(_site(tmp_path, "4.3.0", None))


def test_this_environment_is_consistent():
    """The locked environment (uv drops pyspark-client) must pass its own check."""
    dist = metadata.distribution("pyspark")
    assert files_version(dist) == dist.version
    check_pyspark_install()


def test_every_error_code_comes_back_as_its_own_class():
    """A code reported by a phase is rebuilt as its class, so its retry decision survives (a code
    missing from the lookup would come back as a retryable CTAS_ERROR)."""
    from airflow_provider_ctas.core import errors

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.CtasError)]
    assert len({c.code for c in classes}) == len(classes), "codes are unique"
    for cls in classes:
        rebuilt = errors.error_from_code(cls.code, "message")
        assert type(rebuilt) is cls and rebuilt.retryable == cls.retryable
