"""airflow-lakeformat: maintenance for Apache Paimon and Apache Iceberg tables, as a library, a CLI and an Airflow provider.

``from airflow_lakeformat import open_table`` opens a table of either format (resolved on first use, so
importing the package loads nothing heavy).
"""

from typing import Any

from airflow_lakeformat.version import __version__

__all__ = ["__version__", "open_table"]


def __getattr__(name: str) -> Any:
    if name == "open_table":
        from airflow_lakeformat.core.tables import open_table

        return open_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
