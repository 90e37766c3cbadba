"""The Hive-metastore layer every strategy stands on: the catalog client (one call per question,
classic or Connect), ownership markers and staging names, and the metastore's lineage namespace.

Strategies (``session_catalog``, ``iceberg``, ``delta``) import this package and never each other.
"""
