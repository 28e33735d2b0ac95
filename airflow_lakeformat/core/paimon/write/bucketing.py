"""Fixed-bucket tables: the bucket of a row, as Paimon's ``DefaultBucketFunction`` computes it.

* **Buckets.** Unaware-bucket tables (``bucket = -1``) keep files in ``bucket-0`` with
  ``_TOTAL_BUCKETS = -1``. Fixed-bucket tables (``bucket > 0``) are supported with the default
  bucket function only: every row's ``bucket-key`` is hashed as ``DefaultBucketFunction`` does
  (Murmur3 by words over the key's BinaryRow, ``abs(hash % buckets)``) and a registered file whose
  rows do not all hash to its directory's bucket is refused. Keys of fixed-width integer-like types
  (BOOLEAN, TINYINT, SMALLINT, INT, DATE, BIGINT) are hashed vectorized, every row's BinaryRow image built
  in one byte matrix; other keys row by row. The same function routes a primary-key table's rows
  (``pk_writes``; its bucket key is ``bucket-key`` or the trimmed primary key).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.arrow_types import internal_values
from airflow_lakeformat.core.paimon.types import (
    BINARY_ROOTS,
    CHARACTER_ROOTS,
    INTEGER_ROOTS,
    TIMESTAMP_ROOTS,
    DataType,
)

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur_hash_by_words(data: bytes) -> int:
    """Paimon's ``MurmurHashUtils.hashBytesByWords`` (seed 42, little-endian words), as a signed int."""
    if len(data) % 4:
        raise ValueError("length must be a multiple of 4")
    h1 = 42
    for (k1,) in struct.iter_unpack("<I", data):
        k1 = _rotl((k1 * 0xCC9E2D51) & _MASK, 15)
        h1 ^= (k1 * 0x1B873593) & _MASK
        h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def default_bucket(key_row: bytes, num_buckets: int) -> int:
    """``DefaultBucketFunction``: ``abs(row.hashCode() % n)`` of a serialized bucket-key row."""
    # BinaryRow.hashCode hashes the row image, i.e. without our 4-byte arity prefix.
    return abs(murmur_hash_by_words(key_row[4:])) % num_buckets


def bucket_key_type_supported(dtype: DataType) -> bool:
    """Whether rows are hashed on a bucket-key column of this type (as Java would hash it)."""
    # FLOAT/DOUBLE are left out: Java may normalise NaN and -0.0 in ways we have not verified.
    root = dtype.root
    return (
        root in INTEGER_ROOTS
        or root in CHARACTER_ROOTS
        or root in BINARY_ROOTS
        or root in TIMESTAMP_ROOTS
        or root in ("BOOLEAN", "DATE", "TIME", "DECIMAL")
    )


def row_buckets(
    data: pa.Table, keys: Sequence[str], types: Sequence[DataType], num_buckets: int
) -> list[int]:
    """The bucket of every row, from its bucket-key columns (already cast to the table's types)."""
    if data.num_rows and all(t.root in _FIXED_WIDTH for t in types):
        fast: list[int] = _fixed_width_buckets(data, keys, types, num_buckets).tolist()
        return fast
    columns = [internal_values(data.column(k), t) for k, t in zip(keys, types, strict=True)]
    key_types = list(types)
    cache: dict[tuple[Any, ...], int] = {}
    out = []
    for row in zip(*columns, strict=True):
        bucket = cache.get(row)
        if bucket is None:
            bucket = default_bucket(binary_row.encode(list(row), key_types), num_buckets)
            if len(cache) < 100_000:
                cache[row] = bucket
        out.append(bucket)
    return out


# Key types whose BinaryRow is the header and one little-endian value per 8-byte slot (no variable part).
_FIXED_WIDTH = {"BOOLEAN": 1, "TINYINT": 1, "SMALLINT": 2, "INT": 4, "DATE": 4, "BIGINT": 8}
_ARROW_OF_WIDTH = {1: pa.int8(), 2: pa.int16(), 4: pa.int32(), 8: pa.int64()}


def _fixed_width_buckets(
    data: pa.Table, keys: Sequence[str], types: Sequence[DataType], num_buckets: int
) -> np.ndarray:
    """:func:`row_buckets` for keys of fixed-width integer-like types, vectorized: every row's BinaryRow
    image is built in one byte matrix (header with the null bits, then the slots) and hashed word by word
    as :func:`murmur_hash_by_words` does, in uint32 arithmetic."""
    arity = len(types)
    header = binary_row.header_size(arity)
    rows = np.zeros((data.num_rows, header + 8 * arity), dtype=np.uint8)
    for pos, (key, dtype) in enumerate(zip(keys, types, strict=True)):
        width = _FIXED_WIDTH[dtype.root]
        column = data.column(key).combine_chunks()
        valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        ints = column.cast(_ARROW_OF_WIDTH[width]).fill_null(0).to_numpy(zero_copy_only=False)
        slot = header + 8 * pos
        raw = np.ascontiguousarray(ints.astype(f"<i{width}")).view(np.uint8).reshape(-1, width)
        rows[:, slot : slot + width] = raw
        bit = pos + 8
        rows[~valid, bit // 8] |= np.uint8(1 << (bit % 8))
    words = rows.view("<u4")
    h1 = np.full(data.num_rows, 42, dtype=np.uint32)
    for index in range(words.shape[1]):
        k1 = words[:, index] * np.uint32(0xCC9E2D51)
        k1 = (k1 << np.uint32(15)) | (k1 >> np.uint32(17))
        h1 ^= k1 * np.uint32(0x1B873593)
        h1 = ((h1 << np.uint32(13)) | (h1 >> np.uint32(19))) * np.uint32(5) + np.uint32(0xE6546B64)
    h1 ^= np.uint32(rows.shape[1])
    h1 ^= h1 >> np.uint32(16)
    h1 *= np.uint32(0x85EBCA6B)
    h1 ^= h1 >> np.uint32(13)
    h1 *= np.uint32(0xC2B2AE35)
    h1 ^= h1 >> np.uint32(16)
    return np.abs(h1.view(np.int32).astype(np.int64)) % num_buckets
