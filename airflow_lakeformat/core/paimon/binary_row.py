"""BinaryRow: Paimon's serialized row, byte-identical to Paimon Java.

Partitions, min/max keys and column statistics are BinaryRows. On disk each is prefixed with its
arity as a 4-byte big-endian int; the row image itself is little-endian:

* header: ``((arity + 63 + 8) // 64) * 8`` bytes; byte 0 is the RowKind, the null bit of field i is
  bit ``i + 8`` (LSB first);
* one 8-byte slot per field;
* a variable part, 8-byte aligned and zero padded, addressed by ``(offset << 32) | length`` slots
  whose offsets count from the row start (after the arity prefix).

Values are Paimon's *internal* representations, because partition paths are built from them:
DATE is days since epoch, TIME milliseconds of day, TIMESTAMP a :class:`Timestamp`, DECIMAL a
:class:`decimal.Decimal`, character types ``str`` and binary types ``bytes``.

Identity in Paimon compares partitions by these bytes. Never re-encode a partition read from a
manifest; copy its bytes. Encoding is for new rows (statistics of files we register).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from airflow_lakeformat.core.paimon.types import BINARY_ROOTS, CHARACTER_ROOTS, TIMESTAMP_ROOTS, DataType

_HIGHEST_FIRST_BIT = 0x80 << 56
_HIGHEST_SECOND_TO_EIGHTH_BIT = 0x7F << 56
_ARITY = struct.Struct(">i")
_I8 = struct.Struct("<b")
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


class Timestamp(NamedTuple):
    """Paimon's internal timestamp: epoch milliseconds plus nanoseconds within that millisecond."""

    millisecond: int
    nano_of_millisecond: int = 0


def header_size(arity: int) -> int:
    return ((arity + 63 + 8) // 64) * 8


def arity_of(data: bytes) -> int:
    """The field count from a serialized row's prefix."""
    if len(data) < 4:
        raise ValueError(f"serialized BinaryRow is {len(data)} bytes, shorter than its arity prefix")
    return int(_ARITY.unpack_from(data, 0)[0])


def is_null_at(data: bytes, pos: int) -> bool:
    bit = pos + 8
    return bool(data[4 + bit // 8] & (1 << (bit % 8)))


def decode(data: bytes, types: Sequence[DataType]) -> list[Any]:
    """Decode a serialized BinaryRow into internal values, one per field.

    The arity comes from the prefix; stats rows may be narrower than ``types``, never wider.
    """
    arity = arity_of(data)
    if arity > len(types):
        raise ValueError(f"BinaryRow has {arity} fields but only {len(types)} types were given")
    row = memoryview(data)[4:]
    fixed = header_size(arity)
    if len(row) < fixed + 8 * arity:
        raise ValueError(f"BinaryRow of arity {arity} needs {fixed + 8 * arity} bytes, has {len(row)}")
    return [None if is_null_at(data, i) else _read_field(row, fixed + 8 * i, types[i]) for i in range(arity)]


def _var_part(row: memoryview, slot: int) -> bytes:
    word = _U64.unpack_from(row, slot)[0]
    offset, length = word >> 32, word & 0xFFFFFFFF
    if offset + length > len(row):
        raise ValueError(f"BinaryRow variable part [{offset}, {offset + length}) is outside the row")
    return bytes(row[offset : offset + length])


def _read_field(row: memoryview, slot: int, dtype: DataType) -> Any:
    root = dtype.root
    if root == "BOOLEAN":
        return row[slot] != 0
    if root == "TINYINT":
        return _I8.unpack_from(row, slot)[0]
    if root == "SMALLINT":
        return _I16.unpack_from(row, slot)[0]
    if root in ("INT", "DATE", "TIME"):
        return _I32.unpack_from(row, slot)[0]
    if root == "BIGINT":
        return _I64.unpack_from(row, slot)[0]
    if root == "FLOAT":
        return _F32.unpack_from(row, slot)[0]
    if root == "DOUBLE":
        return _F64.unpack_from(row, slot)[0]
    if root == "DECIMAL":
        scale = dtype.scale or 0
        if dtype.is_compact_decimal:
            unscaled = _I64.unpack_from(row, slot)[0]
        else:
            unscaled = int.from_bytes(_var_part(row, slot), "big", signed=True)
        # Built from its digits: Decimal arithmetic would round to the context's 28 digits.
        return Decimal((1 if unscaled < 0 else 0, tuple(int(d) for d in str(abs(unscaled))), -scale))
    if root in TIMESTAMP_ROOTS:
        if dtype.is_compact_timestamp:
            return Timestamp(_I64.unpack_from(row, slot)[0], 0)
        word = _U64.unpack_from(row, slot)[0]
        offset, nanos = word >> 32, word & 0xFFFFFFFF
        return Timestamp(_I64.unpack_from(row, offset)[0], nanos)
    if root in CHARACTER_ROOTS or root in BINARY_ROOTS or root in ("VARIANT", "BLOB"):
        word = _U64.unpack_from(row, slot)[0]
        if word & _HIGHEST_FIRST_BIT:
            length = (word & _HIGHEST_SECOND_TO_EIGHTH_BIT) >> 56
            raw = bytes(row[slot : slot + length])
        else:
            raw = _var_part(row, slot)
        return raw.decode("utf-8") if root in CHARACTER_ROOTS else raw
    raise ValueError(f"BinaryRow decoding of {dtype.sql()} is not supported")


class _Writer:
    def __init__(self, arity: int) -> None:
        self.arity = arity
        self.fixed = header_size(arity)
        self.buf = bytearray(self.fixed + 8 * arity)

    def slot(self, pos: int) -> int:
        return self.fixed + 8 * pos

    def set_null(self, pos: int) -> None:
        bit = pos + 8
        self.buf[bit // 8] |= 1 << (bit % 8)

    def append_var(self, data: bytes, reserve: int | None = None) -> int:
        """Append to the variable part, zero padded to a word (or ``reserve`` bytes); return the offset."""
        offset = len(self.buf)
        size = reserve if reserve is not None else (len(data) + 7) // 8 * 8
        self.buf += data + bytes(size - len(data))
        return offset

    def put_offset_and_length(self, pos: int, offset: int, length: int) -> None:
        _U64.pack_into(self.buf, self.slot(pos), (offset << 32) | length)


def encode(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """Serialize internal values as Paimon Java's ``BinaryRowWriter`` + ``serializeBinaryRow`` do."""
    if len(values) != len(types):
        raise ValueError(f"{len(values)} values for {len(types)} types")
    writer = _Writer(len(values))
    for pos, (value, dtype) in enumerate(zip(values, types, strict=True)):
        _write_field(writer, pos, value, dtype)
    return _ARITY.pack(len(values)) + bytes(writer.buf)


def _write_field(w: _Writer, pos: int, value: Any, dtype: DataType) -> None:
    root = dtype.root
    slot = w.slot(pos)
    if value is None:
        w.set_null(pos)
        # Java reserves the variable-part space of non-compact DECIMAL and TIMESTAMP even for null.
        if root == "DECIMAL" and not dtype.is_compact_decimal:
            w.put_offset_and_length(pos, w.append_var(b"", reserve=16), 0)
        elif root in TIMESTAMP_ROOTS and not dtype.is_compact_timestamp:
            w.put_offset_and_length(pos, w.append_var(b"", reserve=8), 0)
        return
    if root == "BOOLEAN":
        w.buf[slot] = 1 if value else 0
    elif root == "TINYINT":
        _I8.pack_into(w.buf, slot, value)
    elif root == "SMALLINT":
        _I16.pack_into(w.buf, slot, value)
    elif root in ("INT", "DATE", "TIME"):
        _I32.pack_into(w.buf, slot, value)
    elif root == "BIGINT":
        _I64.pack_into(w.buf, slot, value)
    elif root == "FLOAT":
        _F32.pack_into(w.buf, slot, value)
    elif root == "DOUBLE":
        _F64.pack_into(w.buf, slot, value)
    elif root == "DECIMAL":
        unscaled = _unscaled(value, dtype.scale or 0)
        if dtype.is_compact_decimal:
            _I64.pack_into(w.buf, slot, unscaled)
        else:
            raw = _java_big_integer_bytes(unscaled)
            if len(raw) > 16:
                raise ValueError(f"decimal {value} does not fit DECIMAL({dtype.precision}, {dtype.scale})")
            w.put_offset_and_length(pos, w.append_var(raw, reserve=16), len(raw))
    elif root in TIMESTAMP_ROOTS:
        ts = value if isinstance(value, Timestamp) else Timestamp(int(value), 0)
        if dtype.is_compact_timestamp:
            _I64.pack_into(w.buf, slot, ts.millisecond)
        else:
            offset = w.append_var(_I64.pack(ts.millisecond), reserve=8)
            w.put_offset_and_length(pos, offset, ts.nano_of_millisecond)
    elif root in CHARACTER_ROOTS or root in BINARY_ROOTS or root in ("VARIANT", "BLOB"):
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if len(raw) <= 7:
            w.buf[slot : slot + len(raw)] = raw
            w.buf[slot + 7] = 0x80 | len(raw)
        else:
            w.put_offset_and_length(pos, w.append_var(raw), len(raw))
    else:
        raise ValueError(f"BinaryRow encoding of {dtype.sql()} is not supported")


def _unscaled(value: Any, scale: int) -> int:
    dec: Decimal = value if isinstance(value, Decimal) else Decimal(str(value))
    sign, digits, exponent = dec.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"decimal {value} is not finite")
    # Exact integer arithmetic: Decimal operations would round to the context's 28 digits.
    magnitude: int = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        magnitude *= 10**shift
    else:
        magnitude, remainder = divmod(magnitude, 10**-shift)
        if remainder:
            raise ValueError(f"decimal {value} has more than {scale} fraction digits")
    return -magnitude if sign else magnitude


def _java_big_integer_bytes(value: int) -> bytes:
    """Minimal big-endian two's complement, as ``BigInteger.toByteArray`` returns it."""
    # BigInteger.bitLength() excludes the sign bit; for negatives that is the length of ~value.
    bits = value.bit_length() if value >= 0 else (~value).bit_length()
    return value.to_bytes(bits // 8 + 1, "big", signed=True)


EMPTY_ROW = encode([], [])
