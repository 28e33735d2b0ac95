"""How new data files are named and written: ``<data-file.prefix><uuid>-<n>.parquet``, compressed as
``file.compression`` says, in row groups of about a quarter of ``target-file-size``."""

from __future__ import annotations

import uuid
from typing import Any

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.write.layout import PARQUET_EXTENSION

# Each chunk handed to the Parquet writer (one row group) holds about a quarter of the target size,
# at most this many in-memory bytes, so a rolled file overshoots ``target-file-size`` by at most
# one compressed chunk.
MAX_CHUNK_BYTES = 64 << 20

_COMPRESSIONS = {"zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"}


class FileNamer:
    """Names of one writer's new files: ``<prefix><uuid>-<n>.parquet``, ``n`` counting from 0."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.uuid = uuid.uuid4()
        self.count = 0

    def next(self) -> str:
        name = f"{self.prefix}{self.uuid}-{self.count}{PARQUET_EXTENSION}"
        self.count += 1
        return name


def writer_options(schema: TableSchema) -> dict[str, Any]:
    """``pq.ParquetWriter`` options for the table's ``file.compression`` (Paimon's Parquet layout)."""
    options = schema.table_options
    compression = (options.get("file.compression") or "zstd").lower()
    if compression not in _COMPRESSIONS:
        raise RegisterError(schema.options.get("file.compression", ""), "file.compression is not supported")
    out: dict[str, Any] = {
        "compression": "none" if compression == "uncompressed" else compression,
        "write_statistics": True,
        # Paimon stores DECIMAL(p<=9) as INT32 and DECIMAL(p<=18) as INT64 (ParquetSchemaConverter).
        "store_decimal_as_integer": True,
    }
    if compression == "zstd":
        out["compression_level"] = int(options.get("file.compression.zstd-level") or 1)
    return out
