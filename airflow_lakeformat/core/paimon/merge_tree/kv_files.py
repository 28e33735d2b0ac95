"""Key-value data files: :func:`read_kv` (``kv_read``) and :func:`write_kv` (``kv_write``), one import for both.

The contract of issue 27 names this module; the two halves live in their own modules to stay small.
"""

from __future__ import annotations

from airflow_lakeformat.core.paimon.merge_tree.kv_read import (
    holds_retractions,
    read_kv,
    retraction_check,
    to_kv_table,
)
from airflow_lakeformat.core.paimon.merge_tree.kv_write import level_format, thin_mode, write_kv

__all__ = [
    "holds_retractions",
    "level_format",
    "read_kv",
    "retraction_check",
    "thin_mode",
    "to_kv_table",
    "write_kv",
]
