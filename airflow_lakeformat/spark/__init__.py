"""PySpark entry points for the heavy work; imports the core, never Airflow."""
