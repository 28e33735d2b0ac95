"""The engine-free core: Paimon metadata read and written by our own code, Iceberg through pyiceberg.

``open_table`` (``core/tables.py``) is the entry point for both formats; ``core/iceberg/`` is the Iceberg
package; the format-neutral parts are ``io``, ``errors``, ``formats``, ``progress`` and
``maintenance/{deletion,lock,results}``. Imports neither airflow nor pyspark; the Spark jobs and the
Airflow layer build on it.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from airflow_lakeformat.core.tables import open_table

# Resolved on first use: importing one submodule (the operators import ``core.errors`` while a DAG file is
# parsed) must not load the Avro codecs, pyarrow and fsspec with it.
_EXPORTS = {
    "CorruptMetadataError": "errors",
    "DuplicateFileError": "errors",
    "LakeformatError": "errors",
    "MissingMetadataError": "errors",
    "SnapshotNotFoundError": "errors",
    "TableNotFoundError": "errors",
    "TagNotFoundError": "errors",
    "UnsupportedFormatError": "errors",
    "LiveFile": "live_files",
    "live_entries": "live_files",
    "live_files": "live_files",
    "DataFileMeta": "manifest",
    "FileKind": "manifest",
    "ManifestEntry": "manifest",
    "ManifestFileMeta": "manifest",
    "TableSchema": "schema",
    "CommitKind": "snapshot",
    "Snapshot": "snapshot",
    "Table": "table",
    "open_table": "tables",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


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
    "open_table",
]
