"""The driver entry point: the application spark-submit runs, and the phase loop it shares with the
Spark Connect runner. It asks the strategy registry which executor runs a request's table.

Modules here may import pyspark but never Airflow: they run inside the Spark driver.
"""
