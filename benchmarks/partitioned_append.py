"""Whether staging in a directory costs a partitioned write anything: in one JVM, rounds alternated.

    .venv/bin/python benchmarks/partitioned_append.py [--rows 1e8] [--rounds 4]

The benchmark's query (``ctas_benchmark.SELECT``) partitioned by country, written three ways: an
``INSERT INTO`` a partitioned table (how ``create`` stages), an append to a bare directory, and the
same append with the rows counted by the provider's own ``WriteObservation`` (how
``overwrite_partitions`` and the flip stage). Each round runs the three in a rotated order, and
the disk is synced before each write, so no write pays for the previous one's pages still being
flushed. Prints each write, then per form the median of its per-round difference from the
``INSERT``; the first round (the JVM warming up) is left out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from ctas_benchmark import SELECT  # noqa: E402
from write_checks import PrintLog, local_spark  # noqa: E402

from airflow_provider_ctas.catalogs.write_observation import WriteObservation  # noqa: E402

COLUMNS = "order_id BIGINT, customer_id BIGINT, amount DOUBLE, quantity INT, sku STRING, note STRING, country STRING"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1e8")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    rows = int(float(args.rows))
    query = SELECT.format(rows=rows)
    with tempfile.TemporaryDirectory() as scratch:
        spark = local_spark(
            **{
                "spark.sql.warehouse.dir": f"{scratch}/warehouse",
                "spark.driver.extraJavaOptions": f"-Dderby.system.home={scratch}",
            }
        )
        names = [column.split()[0] for column in COLUMNS.split(", ")]
        directory = f"{scratch}/staging"

        def insert() -> None:
            spark.sql(f"INSERT INTO staged BY NAME {query}")

        def append(observed: bool) -> None:
            frame = spark.sql(query).select(*names)
            observation = WriteObservation([], partial=False)
            if observed:
                frame = observation.attach(frame, None)
            frame.write.mode("append").partitionBy("country").parquet(directory)
            measured = observation.collect(PrintLog())
            if observed and (measured is None or measured.rows != rows):
                raise SystemExit(f"the observation counted {measured}, not {rows} rows")

        forms: dict[str, Callable[[], None]] = {
            "INSERT INTO a partitioned table": insert,
            "append to a directory": lambda: append(observed=False),
            "append to a directory, rows observed": lambda: append(observed=True),
        }
        seconds: dict[str, list[float]] = {form: [] for form in forms}
        for round_ in range(args.rounds):
            order = list(forms)[round_ % len(forms) :] + list(forms)[: round_ % len(forms)]
            for form in order:
                spark.sql("DROP TABLE IF EXISTS staged")
                shutil.rmtree(directory, ignore_errors=True)
                spark.sql(f"CREATE TABLE staged ({COLUMNS}) USING parquet PARTITIONED BY (country)")
                os.sync()
                started = time.monotonic()
                forms[form]()
                seconds[form].append(time.monotonic() - started)
                print(f"round {round_} {form}: {seconds[form][-1]:.2f}s", flush=True)
        spark.stop()
    base = seconds["INSERT INTO a partitioned table"]
    print(f"\nrounds 1-{args.rounds - 1}, {args.rows} rows: median, and the median of the per-round difference")
    for form, values in seconds.items():
        differences = [value - b for value, b in zip(values[1:], base[1:], strict=True)]
        print(f"  {form}: {statistics.median(values[1:]):.2f}s ({statistics.median(differences):+.2f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
