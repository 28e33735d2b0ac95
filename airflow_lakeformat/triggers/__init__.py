"""Airflow triggers (run in the triggerer; async, no worker slot held)."""
