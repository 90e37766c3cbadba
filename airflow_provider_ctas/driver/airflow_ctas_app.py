"""What spark-submit runs. Kept to an import: spark-submit puts this file's directory on sys.path."""

import sys

from airflow_provider_ctas.driver.app import main

if __name__ == "__main__":
    sys.exit(main())
