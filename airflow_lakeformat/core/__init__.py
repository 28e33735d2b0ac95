"""The engine-free core: Paimon metadata read and written by our own code, Iceberg through pyiceberg.

``open_table`` (``core/tables.py``) is the entry point for both formats. One package per format,
``core/paimon/`` and ``core/iceberg/``, which never import each other; the format-neutral parts are
``io``, ``errors``, ``formats``, ``units``, ``progress``, ``sources``, ``tables`` and
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
    from airflow_lakeformat.core.paimon.live_files import LiveFile, live_entries, live_files
    from airflow_lakeformat.core.paimon.manifest import (
        DataFileMeta,
        FileKind,
        ManifestEntry,
        ManifestFileMeta,
    )
    from airflow_lakeformat.core.paimon.schema import TableSchema
    from airflow_lakeformat.core.paimon.snapshot import CommitKind, Snapshot
    from airflow_lakeformat.core.paimon.table import Table
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
    "LiveFile": "paimon.live_files",
    "live_entries": "paimon.live_files",
    "live_files": "paimon.live_files",
    "DataFileMeta": "paimon.manifest",
    "FileKind": "paimon.manifest",
    "ManifestEntry": "paimon.manifest",
    "ManifestFileMeta": "paimon.manifest",
    "TableSchema": "paimon.schema",
    "CommitKind": "paimon.snapshot",
    "Snapshot": "paimon.snapshot",
    "Table": "paimon.table",
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
