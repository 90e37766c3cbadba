"""Process managers for a realistic local stack (metastore service, standalone cluster, Spark Connect
server, Airflow's services, PostgreSQL databases), used by the quickstart, the tests and the
benchmarks.

Development tooling: it lives in the repository, not in the provider's wheel (nothing here is
shipped to Spark drivers), and may use the dev dependency group (psycopg2).
"""
