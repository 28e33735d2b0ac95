"""The engine-free Paimon core: reads (and, for maintenance, writes) Paimon metadata over fsspec.

Imports neither airflow nor pyspark; the Spark jobs and the Airflow layer build on it.
"""

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    DuplicateFileError,
    LakeformatError,
    MissingMetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
    TagNotFoundError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.live_files import LiveFile, live_entries, live_files
from airflow_lakeformat.core.manifest import DataFileMeta, FileKind, ManifestEntry, ManifestFileMeta
from airflow_lakeformat.core.schema import TableSchema
from airflow_lakeformat.core.snapshot import CommitKind, Snapshot
from airflow_lakeformat.core.table import Table

__all__ = [
    "CommitKind",
    "CorruptMetadataError",
    "DataFileMeta",
    "DuplicateFileError",
    "FileKind",
    "LakeformatError",
    "LiveFile",
    "ManifestEntry",
    "ManifestFileMeta",
    "MissingMetadataError",
    "Snapshot",
    "SnapshotNotFoundError",
    "Table",
    "TableNotFoundError",
    "TableSchema",
    "TagNotFoundError",
    "UnsupportedFormatError",
    "live_entries",
    "live_files",
]
