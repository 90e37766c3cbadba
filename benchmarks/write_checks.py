"""What the built-in checks cost the write that decides them, in one JVM, rounds alternated.

    .venv/bin/python benchmarks/write_checks.py [--rows 1e7] [--rounds 9]

The benchmark's query (``ctas_benchmark.SELECT``) written as Parquet partitioned by country, as a
staged version is, with the typical checks the write decides (a row count, two not-nulls, accepted
values, a value range: ``one_run.CHECKS_IN_WRITE``) attached by the provider's own
``WriteObservation`` in each of its forms, against the bare write. Prints each round and the medians;
the first round (the JVM warming up) is left out of them.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from ctas_benchmark import SELECT  # noqa: E402
from one_run import CHECKS_IN_WRITE  # noqa: E402

from airflow_provider_ctas.catalogs.write_observation import WriteObservation  # noqa: E402
from airflow_provider_ctas.core.checks import checks_from_wire  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMS = {
    "no checks": None,
    "the rows and every check observed (before the guards)": {"guarding": False, "rows_reported": False},
    "guards, the rows observed (a write that reports no rows)": {"guarding": True, "rows_reported": False},
    "guards, the rows from the write's metrics (an INSERT)": {"guarding": True, "rows_reported": True},
}


class PrintLog:
    """What the provider logs, printed (the ``Reporter`` a ``WriteObservation`` reports to)."""

    def info(self, message: str) -> None:
        print(message)

    warning = info


def local_spark(**conf: str) -> SparkSession:
    """The benchmark's driver: local[2] with 4 GiB, as ``ctas_benchmark`` runs each approach."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "4g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1e7")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    spark = local_spark()
    query = SELECT.format(rows=int(float(args.rows)))
    checks = checks_from_wire(CHECKS_IN_WRITE)
    seconds: dict[str, list[float]] = {form: [] for form in FORMS}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for form, how in FORMS.items():
                out = Path(scratch) / "out"
                shutil.rmtree(out, ignore_errors=True)
                frame = spark.sql(query)
                observation = WriteObservation(checks, partial=False)
                if how is not None:
                    observation.guarding = how["guarding"]
                    frame = observation.attach(frame, frame.schema, rows_reported=how["rows_reported"])
                started = time.monotonic()
                frame.write.partitionBy("country").parquet(str(out))
                took = time.monotonic() - started
                if how is not None and observation.collect(PrintLog(), rows=0) is None:
                    raise SystemExit(f"{form}: the write measured nothing")
                seconds[form].append(took)
                print(f"round {round_} {form}: {took:.2f}s", flush=True)
    bare = statistics.median(seconds["no checks"][1:])
    print(f"\nmedians of rounds 1-{args.rounds - 1}, {args.rows} rows:")
    for form, values in seconds.items():
        median = statistics.median(values[1:])
        print(f"  {form}: {median:.2f}s ({median / bare:.3f} of the bare write)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
