"""The driver's NumPy check: the same answers as pyspark's converters, without importing pandas,
pyarrow or NumPy to give them (run in a fresh interpreter: converters are process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from py4j import protocol
from pyspark.sql import types
from airflow_provider_ctas.driver.app import _check_numpy_without_importing_it

_check_numpy_without_importing_it()
ours = [c for c in protocol.INPUT_CONVERTER if isinstance(c, (types.NumpyScalarConverter, types.NumpyArrayConverter))]
before = [c.can_convert(value) for c in ours for value in ("text", 3, [1, 2])]
loaded = sorted(m for m in ("numpy", "pandas", "pyarrow") if m in sys.modules)
import numpy
after = {type(c).__name__: [c.can_convert(numpy.int64(1)), c.can_convert(numpy.array([1, 2]))] for c in ours}
converted = next(c for c in ours if c.can_convert(numpy.int64(7))).convert(numpy.int64(7), None)
print(json.dumps({"count": len(ours), "before": before, "loaded": loaded, "after": after, "converted": converted}))
"""


def test_the_driver_checks_for_numpy_values_without_importing_numpy_pandas_or_pyarrow() -> None:
    finished = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert result["count"] == 2, "both of pyspark's NumPy converters are replaced, none dropped"
    assert result["before"] == [False] * 6
    assert result["loaded"] == [], "nothing imported to answer 'no'"
    # Once NumPy is loaded, a NumPy scalar and a one-dimensional array are recognised as before.
    assert result["after"] == {"ScalarConverter": [True, False], "ArrayConverter": [False, True]}
    assert result["converted"] == 7
