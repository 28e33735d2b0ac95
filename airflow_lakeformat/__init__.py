"""airflow-lakeformat: maintenance for Apache Paimon tables, as a library, a CLI and an Airflow provider."""

__version__ = "0.1.0"
