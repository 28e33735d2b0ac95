"""Framing of Iceberg manifests and manifest lists for the scanned decode: blocks cut, inflated, scanned whole.

pyiceberg 0.12 writes every manifest entry as its own Avro block, so a manifest of 4,500 entries is 4,500
blocks, and reading a million entries is dominated by per-block work. This module keeps that work small,
always giving exactly what :func:`airflow_lakeformat.core.avro_blocks.split_container` and per-block
decoding give:

1. :func:`split`: the header is parsed once per writer (recognised by its bytes afterwards), and the body
   is cut at its sync markers with one C-level ``bytes.split``; each piece must be exactly a record count,
   a byte size and that many bytes. A piece that is not (a marker's bytes inside a block, a truncated
   file) sends the whole file through ``split_container``.
2. :func:`payloads_of`: deflate blocks are inflated whole with :func:`avro_blocks.inflate_blocks` (ISA-L where
   installed: the manifest lists of a long fast-append history are hundreds of MB inflated); other
   codecs through ``avro_blocks``.
3. :func:`scan_whole`: the blocks' data joined is matched in one pass, accepted only if the pattern tiles
   it exactly and every block ends where one of its records ends (then each block decodes as it would
   alone).

Example::

    container = split(data)
    found = scan_whole(pattern, payloads_of(container))  # (matches, joined data) or None
"""

from __future__ import annotations

import re
from itertools import accumulate

from airflow_lakeformat.core import avro_blocks, avro_scan

_HEADERS: list[tuple[bytes, bytes, str]] = []  # (header before its sync marker, schema, codec) seen


def _header(data: bytes) -> tuple[bytes, bytes, str]:
    """(header up to its sync marker, writer schema, codec) of an object container file."""
    for known in _HEADERS:
        if data.startswith(known[0]):
            return known
    if data[:4] != avro_blocks.MAGIC:
        raise ValueError("not an Avro object container file (bad magic)")
    pos, meta = 4, {}
    while True:
        count, pos = avro_blocks.read_varint(data, pos)
        if count == 0:
            break
        if count < 0:
            count = -count
            _, pos = avro_blocks.read_varint(data, pos)
        for _ in range(count):
            size, pos = avro_blocks.read_varint(data, pos)
            key = data[pos : pos + size]
            size, pos = avro_blocks.read_varint(data, pos + size)
            meta[key] = data[pos : pos + size]
            pos += size
    if b"avro.schema" not in meta:
        raise ValueError("truncated Avro header")
    known = (data[:pos], meta[b"avro.schema"], meta.get(b"avro.codec", b"null").decode())
    if len(_HEADERS) < 16:
        _HEADERS.append(known)
    return known


def split(data: bytes) -> avro_blocks.Container:
    """:func:`avro_blocks.split_container`, faster for files of many small blocks: the body is cut at its
    sync markers in one C-level ``split``, and each piece must be exactly ``count, size, size bytes``; a
    piece that is not (a marker's bytes inside a block, a truncated file) sends the whole file through
    ``split_container`` instead."""
    prefix, schema_json, codec = _header(data)
    sync = data[len(prefix) : len(prefix) + avro_blocks.SYNC_SIZE]
    blocks = (
        cut(data, len(prefix) + avro_blocks.SYNC_SIZE, sync) if len(sync) == avro_blocks.SYNC_SIZE else None
    )
    if blocks is None:
        return avro_blocks.split_container(data)
    return avro_blocks.Container(schema_json, codec, blocks)


def cut(data: bytes, header: int, sync: bytes) -> list[tuple[int, bytes]] | None:
    pieces = data[header:].split(sync)
    if pieces[-1]:
        return None  # the file does not end with a marker
    blocks: list[tuple[int, bytes]] = []
    append = blocks.append
    for piece in pieces[:-1]:
        if len(piece) < 3:
            return None
        # The record count and byte size: zigzag varints, one or two bytes each in the common case.
        count, size = piece[0], piece[1]
        if count < 0x80 and size < 0x80:
            pos = 2
        elif count < 0x80 and piece[2] < 0x80:
            size, pos = size & 0x7F | piece[2] << 7, 3
        else:
            count, pos = avro_blocks.read_varint(piece, 0)
            size, pos = avro_blocks.read_varint(piece, pos)
            count, size = count << 1, size << 1  # undone below: read_varint already unzigzagged
        count, size = (count >> 1) ^ -(count & 1), (size >> 1) ^ -(size & 1)
        if count < 0 or size < 0 or len(piece) - pos != size:
            return None
        append((count, piece[pos:]))
    return blocks


def payloads_of(container: avro_blocks.Container) -> list[tuple[int, bytes]]:
    """(record count, decompressed data) of every block (deflate inflated directly: files pyiceberg writes
    hold one block per entry, so the per-block cost counts)."""
    if container.codec == "deflate":
        return avro_blocks.inflate_blocks(container.blocks)
    return list(avro_blocks.iter_blocks(container))


def scan_whole(pattern: avro_scan.RecordPattern, payloads: list[tuple[int, bytes]]) -> tuple[
        list[re.Match[bytes]], bytes] | None:  # fmt: skip
    """The matches of every record of the file in one pass over its blocks' data joined, or None unless the
    pattern tiles that data exactly and every block ends where one of its records ends (then each block
    decodes as it would alone, so the rows are the block-by-block rows)."""
    if len(payloads) == 1:
        count, payload = payloads[0]
    else:
        payload = b"".join(block for _, block in payloads)
        count = sum(c for c, _ in payloads)
    matches, pos = pattern.scan(payload, count)
    if len(matches) != count or pos != len(payload):
        return None
    if len(payloads) > 1:
        block_ends = list(accumulate(map(len, (block for _, block in payloads))))
        if count == len(payloads) and all(c == 1 for c, _ in payloads):  # one record per block (pyiceberg)
            record_ends = list(map(re.Match.end, matches))
        else:
            last = accumulate(c for c, _ in payloads)
            record_ends = [matches[i - 1].end() if i else 0 for i in last]
        if record_ends != block_ends:
            return None
    return matches, payload
