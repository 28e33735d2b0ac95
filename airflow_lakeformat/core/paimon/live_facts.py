"""The live files of a snapshot as the health report needs them: one tuple per file, grouped by
(partition, bucket), from a projected decode of the manifests.

``live_entries`` (``live_files.py``) gives each live file as a :class:`ManifestEntry` object whose fields
decode on first use: right for a plan that hands entries on, costly for a report that reads four numbers of
each of 100,000 files and keeps none of them. This module reads the same manifests (base then delta, the
snapshot's lists) with the same pattern as the planning decode (``manifest_scan.entry_plan``: one regex
per writer schema, fastavro for any record it does not express, the full decode when the fast path fails)
but turns each record straight into a :data:`FactRow` ``(is_add, identity, file_size, row_count,
delete_row_count)`` and folds the rows with Paimon's ``FileEntry.mergeEntries`` rule (``manifest.
merge_entries``: an ADD of an identity already present is a :class:`DuplicateFileError`, a DELETE removes its
ADD or stays), so the live set is exactly ``live_entries``'.

``identity`` is ``ManifestEntry.identifier()``: (partition bytes, bucket, level, file name, extra files,
embedded index, external path); ``delete_row_count`` is ``_DELETE_ROW_COUNT`` (0 when the writer did not
count it). The fold keys each (partition, bucket) apart, so the result comes grouped without another pass.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from airflow_lakeformat.core import avro_blocks
from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.errors import DuplicateFileError
from airflow_lakeformat.core.paimon import avro
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry, ManifestFileMeta
from airflow_lakeformat.core.paimon.manifest_scan import decode_manifest_for_planning, entry_plan
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

#: ``(is_add, identity, file_size, row_count, delete_row_count)`` of one manifest entry.
FactRow = tuple[bool, tuple[Any, ...], int, int, int]
#: The live rows of a snapshot by (partition bytes, bucket).
GroupedFacts = dict[tuple[bytes, int], list[FactRow]]

_KIND_BYTES = {b"\x00": True, b"\x02": False}  # _KIND 0 (ADD) and 1 (DELETE), zigzag varints
_NULL = b"\x00"
# The fields the fast path reads; the optional ones must be ["null", T] unions (a null is the byte 0).
_NULL_FIRST = {"_EMBEDDED_FILE_INDEX", "_EXTERNAL_PATH", "_DELETE_ROW_COUNT"}
_SCANNED = {
    "_KIND",
    "_PARTITION",
    "_BUCKET",
    "_FILE_NAME",
    "_LEVEL",
    "_EXTRA_FILES",
    "_FILE_SIZE",
    "_ROW_COUNT",
}
_SCANNED |= _NULL_FIRST


@functools.cache
def _short_varints() -> dict[bytes, int]:
    """Every zigzag varint of one or two bytes and its value (16,512 entries)."""
    table = {bytes([b]): (b >> 1) ^ -(b & 1) for b in range(0x80)}
    for low in range(0x80, 0x100):
        for high in range(0x80):
            value = (low & 0x7F) | (high << 7)
            table[bytes([low, high])] = (value >> 1) ^ -(value & 1)
    return table


class _NotScanned(Exception):
    """The fast path cannot take this manifest: the full decode decides."""


def live_facts(
    table: Table,
    snapshot: Snapshot,
    progress: Progress = NO_PROGRESS,
    *,
    delete_counts: bool = True,
    manifests: tuple[list[ManifestFileMeta], list[ManifestFileMeta]] | None = None,
) -> GroupedFacts:
    """The live files of ``snapshot`` as :data:`FactRow` s by (partition, bucket) (the module docstring).

    Args:
        table: the Paimon table.
        snapshot: the snapshot whose base and delta manifests are read.
        progress: receives the manifest reads' progress.
        delete_counts: decode ``_DELETE_ROW_COUNT`` (False: 0 for every file, an append table's).
        manifests: the snapshot's ``table.data_manifests`` (base, delta) when the caller has read them.

    Example:
        >>> table = Table.open("/wh/db.db/t")
        >>> sum(len(rows) for rows in live_facts(table, table.snapshot_manager.latest_snapshot()).values())
        ... # doctest: +SKIP
        100000
    """
    base, delta = manifests or table.data_manifests(snapshot)
    groups: dict[tuple[bytes, int], dict[tuple[Any, ...], FactRow]] = {}
    # read_manifests is typed for entries; it hands on whatever the decoder returns, here FactRows.
    decode: Callable[[bytes, str], list[Any]] = (
        decode_manifest_facts if delete_counts else _without_delete_counts
    )
    with gc_paused():
        decoded: list[list[Any]] = table.read_manifests(
            base + delta, f"snapshot {snapshot.id}", progress, decode
        )
        for rows in decoded:
            _fold(rows, groups)
    return {key: [row for row in merged.values() if row[0]] for key, merged in groups.items()}


def _fold(rows: list[FactRow], groups: dict[tuple[bytes, int], dict[tuple[Any, ...], FactRow]]) -> None:
    """``manifest.merge_entries``' rule on rows, each (partition, bucket) in its own map."""
    for row in rows:
        identity = row[1]
        key = (identity[0], identity[1])
        merged = groups.get(key)
        if merged is None:
            merged = groups[key] = {}
        if row[0]:
            if identity in merged:
                raise DuplicateFileError(
                    identity[3],
                    f"added twice (bucket {identity[1]}, level {identity[2]}); Paimon refuses such a table",
                )
            merged[identity] = row
        elif identity in merged:
            del merged[identity]
        else:
            merged[identity] = row


def decode_manifest_facts(data: bytes, path: str, delete_counts: bool = True) -> list[FactRow]:
    """A manifest's entries as :data:`FactRow` s: the values and refusals of :func:`avro.decode_manifest`
    (``delete_counts=False``: every delete row count read as 0, for tables whose files hold no DELETE record).

    A writer schema without the optional fields (older Paimon) goes through the planning decode, anything
    the fast path refuses through the full decode.
    """
    try:
        return _scan_facts(data, delete_counts)
    except _NotScanned:
        entries = decode_manifest_for_planning(data, path)
    except Exception:
        entries = avro.decode_manifest(data, path)
    return [fact_row(entry, delete_counts) for entry in entries]


def _without_delete_counts(data: bytes, path: str) -> list[FactRow]:
    return decode_manifest_facts(data, path, delete_counts=False)


def fact_row(entry: ManifestEntry, delete_counts: bool = True) -> FactRow:
    """The :data:`FactRow` of a decoded entry (``delete_counts=False``: its delete row count read as 0)."""
    f = entry.file
    deletes = (f.delete_row_count or 0) if delete_counts else 0
    return (entry.kind is FileKind.ADD, entry.identifier(), f.file_size, f.row_count, deletes)


def _scan_facts(data: bytes, delete_counts: bool) -> list[FactRow]:
    container = avro_blocks.split_container(data)
    plan = entry_plan(container.schema_json)
    scanner = plan.scanner
    if scanner.pattern is None or not plan.groups.keys() >= _SCANNED or not plan.null_first >= _NULL_FIRST:
        raise _NotScanned("schema")
    index = {key: (spec[0] - 1, spec[1]) for key, spec in plan.groups.items()}
    kind_i = index["_KIND"][0]
    (part_i, part_read), (bucket_i, bucket_read) = index["_PARTITION"], index["_BUCKET"]
    (name_i, name_read), (level_i, level_read) = index["_FILE_NAME"], index["_LEVEL"]
    (extra_i, extra_read), (size_i, size_read) = index["_EXTRA_FILES"], index["_FILE_SIZE"]
    rows_i, rows_read = index["_ROW_COUNT"]
    (embedded_i, embedded_read), (external_i, external_read) = (
        index["_EMBEDDED_FILE_INDEX"],
        index["_EXTERNAL_PATH"],
    )
    deletes_i, deletes_read = index["_DELETE_ROW_COUNT"]
    result: list[FactRow] = []
    append = result.append
    groups_of = re.Match.groups
    short = _short_varints().get  # one dict lookup instead of a call for the varints of 1 or 2 bytes
    for count, block in avro_blocks.iter_blocks(container):
        matches, rest = scanner.scan(block, count)
        for match in matches:
            g = groups_of(match)
            is_add = _KIND_BYTES.get(g[kind_i])
            if is_add is None:
                raise _NotScanned("kind")
            bucket, level, size, rows = (
                short(g[bucket_i]),
                short(g[level_i]),
                short(g[size_i]),
                short(g[rows_i]),
            )
            if bucket is None:
                bucket = bucket_read(g[bucket_i])
            if level is None:
                level = level_read(g[level_i])
            if size is None:
                size = size_read(g[size_i])
            if rows is None:
                rows = rows_read(g[rows_i])
            extra, embedded, external, deletes = g[extra_i], g[embedded_i], g[external_i], g[deletes_i]
            identity = (
                part_read(g[part_i]),
                bucket,
                level,
                name_read(g[name_i]),
                () if extra == _NULL else tuple(extra_read(extra)),
                None if embedded == _NULL else embedded_read(embedded),
                None if external == _NULL else external_read(external),
            )
            delete_rows = (deletes_read(deletes) or 0) if delete_counts and deletes != _NULL else 0
            append((is_add, identity, size, rows, delete_rows))
        for record in rest:
            if not isinstance(record, dict) or record.get("_VERSION") != avro.MANIFEST_VERSION:
                raise _NotScanned("version")
            append(fact_row(ManifestEntry(record), delete_counts))
    return result
