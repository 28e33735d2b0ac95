"""OpenLineage for the Lakeformat operators: table and source datasets, output statistics, what maintenance did.

:class:`LakeformatLineageMixin` gives an operator ``get_openlineage_facets_on_complete(task_instance)``,
which the OpenLineage provider (``apache-airflow-providers-openlineage``, the ``openlineage`` extra)
calls after a task instance finished. Every OpenLineage import happens inside that method, so the
operators import and run without the provider; the rest of this module is plain Python.

Contract with the operators: in ``execute()`` an operator sets

* ``self._lineage_table_uri``: the table's URI, or for a catalog table (Iceberg ``db.table``) the table's
  location;
* ``self._lineage_result``: the document it returns to XCom (``operation``, ``format``, ``dryRun``,
  ``table`` and the operation's fields, e.g. ``rowsWritten``/``bytesWritten`` for a write);
* optionally ``self._lineage_inputs``: the source URIs a write read.

What the method returns (an ``OperatorLineage``):

* the table as the output dataset (and, for maintenance, also as the input: maintenance reads and rewrites
  the same table); a write's sources as input datasets. Names follow the OpenLineage naming spec: a local
  path is namespace ``file`` with the absolute path as name, ``s3://bucket/key`` is namespace
  ``s3://bucket`` with the key as name (``gs://`` likewise, other URLs ``scheme://authority`` and the path);
* a ``storage`` facet (``StorageDatasetFacet``) with the table format (``paimon`` or ``iceberg``);
* for write, commit and data compaction that were not dry runs, ``outputStatistics``
  (``OutputStatisticsOutputDatasetFacet``: rows, bytes and files written);
* for maintenance, the custom dataset facet ``lakeformatMaintenance``
  (:class:`~airflow_lakeformat.operators.lineage_facets.LakeformatMaintenanceDatasetFacet`): snapshots
  expired, files and bytes deleted by kind, orphans, manifests rewritten, data files rewritten, and whether
  it was a dry run (then the counts say what would have been done).

Result keys are read defensively (older and newer names, missing keys), so lineage never fails a task:
the provider logs and drops an exception raised here anyway.

Example:
    >>> dataset_name("s3://lake/wh/db.db/events/")
    ('s3://lake', 'wh/db.db/events')
    >>> dataset_name("/data/wh/db.db/events")
    ('file', '/data/wh/db.db/events')
    >>> output_statistics({"operation": "write", "dryRun": False, "rowsWritten": 10, "bytesWritten": 2048,
    ...                    "filesWritten": 1})
    {'rowCount': 10, 'size': 2048, 'fileCount': 1}
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

MAINTENANCE_FACET = "lakeformatMaintenance"
OUTPUT_STATISTICS_FACET = "outputStatistics"
STORAGE_FACET = "storage"

WRITE_OPERATIONS = frozenset({"write", "commit"})
MAINTENANCE_OPERATIONS = frozenset(
    {"expire-snapshots", "remove-orphan-files", "compact-manifests", "compact-data"}
)
# Operations that add data files to the table: they get output statistics (when not a dry run).
_STATISTICS_OPERATIONS = frozenset({"write", "commit", "compact-data"})

# Older and newer spellings of the same result field, first match wins.
_ROWS = ("rowsWritten", "rowsAdded", "addedRecords", "recordCount", "rows")
_BYTES = ("bytesWritten", "bytesAdded", "addedFilesSize", "bytes")
_FILES = ("filesWritten", "filesAdded", "addedFiles")
_COMPACTION_ROWS = ("rowsWritten", "rowsRewritten")


# -- naming --------------------------------------------------------------------------------------


def dataset_name(uri: str) -> tuple[str, str]:
    """The OpenLineage ``(namespace, name)`` of a table root, file or directory.

    Args:
        uri: a local path (relative paths are made absolute), ``file://`` URL, ``s3://`` (``s3a``, ``s3n``),
            ``gs://``/``gcs://`` or any other ``scheme://authority/path`` URL.

    Returns:
        ``("file", "/abs/path")`` for local paths; ``("s3://bucket", "key")`` for S3 and likewise for GCS
        (the key without leading or trailing slashes, ``"/"`` for the bucket root); otherwise
        ``("scheme://authority", "/path")``.

    Example:
        >>> dataset_name("file:///wh/t/")
        ('file', '/wh/t')
        >>> dataset_name("s3a://bucket/a/b")
        ('s3://bucket', 'a/b')
    """
    text = str(uri).strip()
    if "://" not in text:
        return "file", os.path.normpath(os.path.abspath(text))
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    path = unquote(parts.path)
    if scheme in ("file", "local"):
        local = posixpath.normpath(path) if path else "/"
        if parts.netloc and parts.netloc != "localhost":
            return f"file://{parts.netloc}", local
        return "file", local
    if scheme in ("s3", "s3a", "s3n"):
        return f"s3://{parts.netloc}", path.strip("/") or "/"
    if scheme in ("gs", "gcs"):
        return f"gs://{parts.netloc}", path.strip("/") or "/"
    name = path.rstrip("/") or "/"
    return f"{scheme}://{parts.netloc}", name


def _looks_like_location(value: Any) -> bool:
    return isinstance(value, str) and "{{" not in value and ("://" in value or value.startswith("/"))


# -- reading results ---------------------------------------------------------------------------


def operation_of(result: Mapping[str, Any] | None) -> str | None:
    """The result's operation, normalised (``compact_data`` -> ``compact-data``); None when absent."""
    if not result or not isinstance(result.get("operation"), str):
        return None
    return str(result["operation"]).strip().lower().replace("_", "-")


def is_dry_run(result: Mapping[str, Any]) -> bool:
    value = result.get("dryRun", result.get("dry_run", False))
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _int(value: Any) -> int | None:
    """An int field (never a bool, a dict of counts by kind, or text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _first_int(result: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for key in keys:
        value = _int(result.get(key))
        if value is not None:
            return value
    return None


def _counts(value: Any) -> dict[str, int] | None:
    """A ``{kind: count}`` mapping of ints, or None."""
    if not isinstance(value, Mapping):
        return None
    counts = {str(k): n for k, v in value.items() if (n := _int(v)) is not None}
    return dict(sorted(counts.items()))


def _count_of(value: Any) -> int | None:
    """A count given as a number, or as the list / mapping it counts."""
    if isinstance(value, (list, tuple, Mapping)):
        return len(value)
    return _int(value)


def output_statistics(result: Mapping[str, Any] | None) -> dict[str, int] | None:
    """``rowCount``, ``size`` (bytes) and ``fileCount`` written, for write, commit and data compaction.

    Args:
        result: the operator's XCom document.

    Returns:
        The fields known (at least one), or None for a dry run, another operation, or nothing known. A
        commit's ``deltaRecordCount`` counts its rows only when it replaced no file (otherwise it is net).
    """
    operation = operation_of(result)
    if result is None or operation not in _STATISTICS_OPERATIONS or is_dry_run(result):
        return None
    if operation == "compact-data":
        rows = _first_int(result, _COMPACTION_ROWS)
        size = _int(result.get("bytesWritten"))
        files = _int(result.get("filesWritten"))
    else:
        rows = _first_int(result, _ROWS)
        if rows is None and operation == "commit" and not _int(result.get("filesDeleted")):
            rows = _int(result.get("deltaRecordCount"))
        size = _first_int(result, _BYTES)
        files = _first_int(result, _FILES)
    stats = {"rowCount": rows, "size": size, "fileCount": files}
    known = {k: v for k, v in stats.items() if v is not None}
    return known or None


def maintenance_fields(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The fields of the ``lakeformatMaintenance`` facet for a maintenance result, else None.

    Args:
        result: the XCom document of expire-snapshots, remove-orphan-files, compact-manifests or
            compact-data, for a Paimon or an Iceberg table.

    Returns:
        The facet's keyword arguments: ``operation``, ``format``, ``dryRun`` and, where the operation
        has them, what was (or in a dry run would be) expired, deleted or rewritten.
    """
    operation = operation_of(result)
    if result is None or operation not in MAINTENANCE_OPERATIONS:
        return None
    table = result.get("table")
    fields: dict[str, Any] = {
        "operation": operation,
        "format": result.get("format") if isinstance(result.get("format"), str) else None,
        "dryRun": is_dry_run(result),
        "table": table if isinstance(table, str) else None,
        "execution": result.get("execution") if isinstance(result.get("execution"), str) else None,
        "snapshotId": _int(result.get("snapshotId")),
    }
    if operation in ("expire-snapshots", "remove-orphan-files"):
        refs = result.get("refsRemoved")
        failed = result.get("failed")
        fields.update(
            {
                "snapshotsExpired": _count_of(result.get("snapshotsExpired")),
                "refsRemoved": sorted(str(r) for r in refs) if isinstance(refs, (Mapping, list)) else None,
                "orphans": _int(result.get("orphans")),
                "filesDeleted": _counts(result.get("filesDeleted", result.get("files"))),
                "bytesDeleted": _counts(result.get("bytesDeleted", result.get("bytes"))),
                "bytesFreed": _int(result.get("bytesFreed")),
                "deleteFailures": _count_of(failed) if failed is not None else None,
            }
        )
        if operation == "expire-snapshots" and fields["snapshotsExpired"] is None:
            fields["snapshotsExpired"] = 0
    elif operation == "compact-manifests":
        fields.update(
            {
                "manifestsBefore": _int(result.get("manifestsBefore")),
                "manifestsAfter": _int(result.get("manifestsAfter")),
                "manifestsRewritten": _int(result.get("manifestsRewritten")),
                "manifestBytesBefore": _int(result.get("bytesBefore")),
                "manifestBytesAfter": _int(result.get("bytesAfter")),
            }
        )
    else:  # compact-data
        fields.update(
            {
                "filesRewritten": _int(result.get("filesRewritten")),
                "filesWritten": _int(result.get("filesWritten")),
                "bytesRewritten": _int(result.get("bytesRewritten")),
                "bytesWritten": _int(result.get("bytesWritten")),
                "rowsRewritten": _int(result.get("rowsRewritten")),
            }
        )
    return fields


# -- the mixin ---------------------------------------------------------------------------------


class LakeformatLineageMixin:
    """OpenLineage facets for a Lakeformat operator, from what its ``execute()`` recorded.

    Mix it into the operator's bases; ``execute()`` sets ``_lineage_table_uri``, ``_lineage_result`` and
    (for writes) ``_lineage_inputs``. The OpenLineage provider then calls
    :meth:`get_openlineage_facets_on_complete` after the task instance finished (and on failure, with
    whatever was recorded by then).

    Example:
        >>> class MyOperator(LakeformatLineageMixin, BaseOperator):  # doctest: +SKIP
        ...     def execute(self, context):
        ...         result = {"operation": "write", "format": "paimon", "dryRun": False, "rowsWritten": 3}
        ...         self._lineage_table_uri, self._lineage_result = "s3://lake/wh/db.db/t", result
        ...         self._lineage_inputs = ["s3://landing/batch.parquet"]
        ...         return result
    """

    _lineage_table_uri: str | None = None
    _lineage_result: Mapping[str, Any] | None = None
    _lineage_inputs: Sequence[str] | None = None

    def _lineage_table_location(self) -> str | None:
        if _looks_like_location(self._lineage_table_uri):
            return self._lineage_table_uri
        result = self._lineage_result or {}
        for candidate in (result.get("location"), result.get("table"), getattr(self, "table", None)):
            if _looks_like_location(candidate):
                return str(candidate)
        return None

    def _lineage_source_uris(self) -> list[str]:
        inputs = self._lineage_inputs
        if inputs is None:
            source = getattr(self, "source", None)
            inputs = [source] if operation_of(self._lineage_result) == "write" and source else []
        if isinstance(inputs, str):
            inputs = [inputs]
        return [str(uri) for uri in inputs if isinstance(uri, str) and uri and "{{" not in uri]

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The datasets and facets of this task instance's run, for the OpenLineage provider.

        Args:
            task_instance: the finished task instance (unused: everything comes from ``execute()``).

        Returns:
            An ``OperatorLineage``: inputs (sources of a write; the table for maintenance), outputs (the
            table with ``storage``, ``outputStatistics`` and ``lakeformatMaintenance`` facets as they
            apply). Empty when ``execute()`` recorded no table.
        """
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import (
            output_statistics_output_dataset,
            storage_dataset,
        )

        from airflow_lakeformat.operators.lineage_facets import LakeformatMaintenanceDatasetFacet

        result = self._lineage_result
        operation = operation_of(result)
        inputs = [InputDataset(*dataset_name(uri)) for uri in self._lineage_source_uris()]
        location = self._lineage_table_location()
        if location is None:
            return OperatorLineage(inputs=inputs)
        namespace, name = dataset_name(location)
        table_format = (result or {}).get("format")
        facets: dict[str, Any] = {}
        if isinstance(table_format, str) and table_format:
            facets[STORAGE_FACET] = storage_dataset.StorageDatasetFacet(storageLayer=table_format)
        if operation in MAINTENANCE_OPERATIONS:
            inputs.append(InputDataset(namespace, name, facets=dict(facets)))
        maintenance = maintenance_fields(result)
        if maintenance is not None:
            facets[MAINTENANCE_FACET] = LakeformatMaintenanceDatasetFacet(**maintenance)
        output_facets: dict[str, Any] = {}
        stats = output_statistics(result)
        if stats is not None:
            output_facets[OUTPUT_STATISTICS_FACET] = (
                output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=stats.get("rowCount"), size=stats.get("size"), fileCount=stats.get("fileCount")
                )
            )
        output = OutputDataset(namespace, name, facets=facets, outputFacets=output_facets)
        return OperatorLineage(inputs=inputs, outputs=[output])
