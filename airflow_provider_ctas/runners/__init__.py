"""How the Airflow side starts Spark work for a phase (spark-submit through the apache-spark provider)."""
