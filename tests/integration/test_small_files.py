"""The provider's own small files (markers, superseded records) under concurrent writers.

Two flips that retire the same old version both write its superseded record; through local disk's
checksummed filesystem that could leave a data file and a ``.crc`` from different writers, and
every later read of the record (GC, the next publish) failed with a ChecksumException.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from airflow_provider_ctas.spark.filesystem import HadoopFileSystem

pytestmark = pytest.mark.integration


def test_concurrent_rewrites_leave_one_whole_text_that_reads_back(spark, tmp_path: Path):
    fs = HadoopFileSystem(spark)
    for round_ in range(100):
        uri = (tmp_path / f"r{round_}" / "_airflow_ctas_superseded.json").as_uri()
        fs.write_text(uri, json.dumps({"by": "an earlier, checksummed write"}))
        # Different lengths, so a mix of two writers' bytes cannot pass for one of them.
        texts = [json.dumps({"by": f"writer {w}", "pad": "x" * (10 * w)}) for w in range(4)]
        start = threading.Barrier(len(texts))

        def write(text: str, uri: str = uri, start: threading.Barrier = start) -> None:
            start.wait()
            fs.write_text(uri, text)

        writers = [threading.Thread(target=write, args=(text,)) for text in texts]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        assert fs.read_text(uri) in texts
    # No checksum or temporary file is left beside a record.
    assert {p.name for p in tmp_path.glob("r*/*")} == {"_airflow_ctas_superseded.json"}
    assert fs.read_text((tmp_path / "missing.json").as_uri()) is None
