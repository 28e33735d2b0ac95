"""Manifest lists decoded only as far as they are new: the rows a fast append carries over are shared.

A fast append (Java's ``FastAppend``, pyiceberg's ``_FastAppendFiles``) writes a manifest list that starts
with the manifests the commit added and then repeats its parent's list row for row, byte for byte. A table
with thousands of snapshots therefore holds thousands of lists that are mostly the same rows; decoding
each whole costs snapshots × manifests. Orphan cleanup and expiry decode them through this module.

Algorithm (:func:`decode_manifest_list_shared`):

1. Frame the list and join its blocks' data (``payload``), as
   :func:`~airflow_lakeformat.core.iceberg.reach.reach_decode.decode_manifest_list` does.
2. When the parent's decoded list is at hand, written under the same writer schema, and this payload ends
   with the parent's payload, decode only the leading bytes: they must hold exactly the missing number of
   records and end exactly where the parent's data starts. The parent's rows follow unchanged.
3. Otherwise decode the whole payload. Either way, every block must end on a record boundary
   (:func:`_aligned`), or the list is decoded the ordinary way and shares nothing.
4. Rows are decoded by the schema's scanner once it is compiled, and before that by fastavro record by
   record; only rows actually decoded count towards
   :data:`~airflow_lakeformat.core.iceberg.reach.reach_decode.SCAN_AFTER_RECORDS`.

:func:`first_of_manifest_list` decodes one row only (how a split read balances lists it has not read).
``tests/unit/test_iceberg_orphan_scale.py`` checks shared decodes against whole ones, including lists whose
tail only looks like the parent's.

Example::

    parent = decode_manifest_list_shared(read("snap-1.avro"), "snap-1.avro")
    child = decode_manifest_list_shared(read("snap-2.avro"), "snap-2.avro", parent)
    assert child.rows[child.own:] == parent.rows
"""

from __future__ import annotations

import io
import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import fastavro

from airflow_lakeformat.core import avro_blocks
from airflow_lakeformat.core.iceberg.reach.reach_decode import (
    FAST_PATH_ERRORS,
    LIST_PLANS,
    ManifestRef,
    SchemaPlan,
    converter_for,
    decode_manifest_list,
    list_converter,
    list_ref_of_record,
)
from airflow_lakeformat.core.iceberg.reach.reach_frames import payloads_of, split


@dataclass(frozen=True, slots=True)
class SharedList:
    """A decoded manifest list and what a later list that carries it over needs: its blocks' data joined
    (``payload``; None when it was not decoded exactly by the scanner) and, per row, how far from the end
    of ``payload`` the row ends (``from_end``). ``own`` is the number of leading rows decoded from this
    file's own bytes (the rest were the parent's rows, carried over). ``schema_json`` is the writer schema
    the rows were decoded with: a child's bytes are only ever read as its parent's rows under the same one."""

    rows: list[ManifestRef]
    payload: bytes | None
    from_end: array[int] | None  # machine integers: a child list copies its parent's with one memcpy
    own: int
    schema_json: bytes | None = None


def _aligned(from_end: Sequence[int], payloads: list[tuple[int, bytes]], total: int) -> bool:
    """Whether every block ends where a record ends (so a block-by-block decode gives the same rows)."""
    records = length = 0
    for count, block in payloads:
        records += count
        length += len(block)
        if (from_end[records - 1] if records else total) != total - length:
            return False
    return True


def decode_manifest_list_shared(data: bytes, location: str, parent: SharedList | None = None) -> SharedList:
    """:func:`decode_manifest_list`, decoding only the rows that are new since ``parent``'s list.

    A fast append writes its new manifests first and then the previous list's rows unchanged, so its
    blocks' data (joined) ends with the parent list's data. When it does, only the leading bytes are
    decoded, which must hold exactly the missing number of records and end exactly where the parent's
    data starts; the parent's rows (decoded exactly from those very bytes) follow. Otherwise, or when the
    blocks do not end on record boundaries, the whole list is decoded as :func:`decode_manifest_list` does.

    Rows are decoded by the schema's scanner once it is compiled, and before that by fastavro record by
    record (its position after each record gives the record boundaries): a chain of fast appends decodes
    about one row per list, so it never pays for compiling a scanner; only rows actually decoded count
    towards :data:`~airflow_lakeformat.core.iceberg.reach.reach_decode.SCAN_AFTER_RECORDS`.

    Args:
        data: The file's bytes.
        location: Its location, named in errors.
        parent: The decoded list of the snapshot's parent, if at hand.

    Raises:
        CorruptMetadataError: Not an Iceberg manifest list, or undecodable (truncated, garbage).
    """
    try:
        container = split(data)
        plan = LIST_PLANS.get(container.schema_json)
        with plan.lock:
            payloads = payloads_of(container)
            payload = payloads[0][1] if len(payloads) == 1 else b"".join(b for _, b in payloads)
            size, total = len(payload), sum(count for count, _ in payloads)
            if (
                parent is not None
                and parent.payload is not None
                and parent.from_end is not None
                and parent.schema_json == container.schema_json
            ):
                head, head_count = size - len(parent.payload), total - len(parent.rows)
                if head >= 0 and head_count >= 0 and payload.endswith(parent.payload):
                    new = _decode_rows(plan, payload[:head], head_count)
                    if new is not None:
                        from_end = array("q", [size - end for end in new[1]]) + parent.from_end
                        if _aligned(from_end, payloads, size):
                            rows = new[0] + parent.rows
                            return SharedList(rows, payload, from_end, head_count, container.schema_json)
            whole = _decode_rows(plan, payload, total)
            if whole is not None:
                from_end = array("q", [size - end for end in whole[1]])
                if _aligned(from_end, payloads, size):
                    return SharedList(whole[0], payload, from_end, total, container.schema_json)
    except FAST_PATH_ERRORS:
        pass
    rows = decode_manifest_list(data, location)
    return SharedList(rows, None, None, len(rows))


def first_of_manifest_list(data: bytes, location: str) -> tuple[int, ManifestRef | None]:
    """(rows, the first row) of a manifest list, decoding only that row (the row count is the blocks').

    Raises:
        CorruptMetadataError: Not an Iceberg manifest list, or undecodable.
    """
    try:
        container = split(data)
        plan = LIST_PLANS.get(container.schema_json)
        total = sum(count for count, _ in container.blocks)
        if not total:
            return 0, None
        first = next((block for count, block in container.blocks if count), None)
        if first is not None:
            payload = avro_blocks.decompress(container.codec, first)
            with plan.lock:
                if plan.writer is None:
                    plan.writer = fastavro.parse_schema(json.loads(plan.schema_json))
            record = fastavro.schemaless_reader(io.BytesIO(payload), plan.writer, None)
            return total, list_ref_of_record(plan, record)  # type: ignore[arg-type]
    except FAST_PATH_ERRORS:
        pass
    rows = decode_manifest_list(data, location)
    return len(rows), rows[0] if rows else None


def _decode_rows(plan: SchemaPlan, data: bytes, count: int) -> tuple[list[ManifestRef], list[int]] | None:
    """``count`` manifest-list rows decoded from ``data`` (blocks' data, joined) and where each ends, or
    None unless they fill it exactly. Called under ``plan.lock``."""
    scanner = plan.scanner_for(count)
    if scanner is not None and scanner.pattern is not None:
        convert = converter_for(plan, list_converter, scanner.pattern)
        matches, pos = scanner.pattern.scan(data, count)
        if len(matches) != count or pos != len(data):
            return None
        return [convert(m) for m in matches], [m.end() for m in matches]
    if plan.writer is None:
        plan.writer = fastavro.parse_schema(json.loads(plan.schema_json))
    stream, read = io.BytesIO(data), fastavro.schemaless_reader
    rows, ends = [], []
    for _ in range(count):
        rows.append(list_ref_of_record(plan, read(stream, plan.writer, None)))  # type: ignore[arg-type]
        ends.append(stream.tell())
    return (rows, ends) if stream.tell() == len(data) else None


__all__ = ["SharedList", "decode_manifest_list_shared", "first_of_manifest_list"]
