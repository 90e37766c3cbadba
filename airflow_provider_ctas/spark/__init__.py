"""The Spark side: the application spark-submit runs, and what it exchanges with Airflow.

Modules here may import pyspark but never Airflow: they run inside the Spark driver.
"""
