"""Reading a source file (Parquet, CSV, JSON lines) as an Arrow table, for the ``write`` of either format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import RegisterError


def read_source(path: str, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Read a ``.parquet``, ``.csv`` or ``.jsonl``/``.json`` (one object per line) file as an Arrow table."""
    lower = path.lower()
    with fsspec.open(path, "rb", **dict(storage_options or {})) as handle:
        if lower.endswith(".parquet"):
            return pq.read_table(handle)
        if lower.endswith(".csv"):
            import pyarrow.csv as pcsv

            return pcsv.read_csv(handle)
        if lower.endswith((".jsonl", ".json", ".ndjson")):
            import pyarrow.json as pjson

            return pjson.read_json(handle)
    raise RegisterError(path, "unsupported source format (use .parquet, .csv or .jsonl)")
