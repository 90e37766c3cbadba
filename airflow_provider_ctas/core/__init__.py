"""The pure transaction layer: two-phase tables, their states, identities and ownership markers.

Nothing in this package imports Airflow or Spark; it runs the same on an Airflow worker, in the
DAG processor and inside the Spark driver.
"""
