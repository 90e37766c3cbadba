"""Atomic CREATE TABLE AS SELECT on Spark, driven by Airflow's task lifecycle.

This top-level module must stay free of Airflow and Spark imports: the package is shipped to the
Spark driver (``--py-files``), where Airflow is not installed.
"""

__version__ = "0.1.0"
