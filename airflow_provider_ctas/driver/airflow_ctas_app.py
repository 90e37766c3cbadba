"""What spark-submit runs. Kept to an import: spark-submit puts this file's directory on sys.path.

The Python check comes first and in old syntax: the package itself needs 3.11 and would fail to
import on an older driver Python with a bare SyntaxError.
"""

import sys

if sys.version_info < (3, 11):  # noqa: UP036 - this line must run on older Pythons
    sys.stderr.write(
        "[airflow-ctas] ERROR: the Spark driver runs Python {}.{}; airflow-provider-ctas needs 3.11 or newer "
        "(point spark.pyspark.driver.python / PYSPARK_DRIVER_PYTHON at one)\n".format(*sys.version_info[:2])
    )
    sys.exit(3)

from airflow_provider_ctas.driver.app import main

if __name__ == "__main__":
    sys.exit(main())
