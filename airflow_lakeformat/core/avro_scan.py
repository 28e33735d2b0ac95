"""Exact decoding of selected fields of Avro records at the speed of a regular expression.

Reading millions of manifest entries only to collect their file names (orphan cleanup) or their
identities (planning) is dominated by decoding fields nobody looks at: fastavro spends about as long
skipping a field as reading it. This module decodes an Avro object container file block by block
and matches each block's records with one regular expression compiled from the file's writer
schema, so the C regex engine walks the bytes and Python only converts the captured fields.

Algorithm:

1. The file is split into blocks and each is decompressed by
   :mod:`airflow_lakeformat.core.avro_blocks` (callers do that; this module sees decompressed
   blocks).
2. :class:`RecordPattern` compiles the writer schema into a regular expression that matches
   exactly the binary encoding of one record, following the Avro specification: a varint is
   ``[\\x80-\\xff]{0,k}[\\x00-\\x7f]`` (k = 4 for int, 9 for long), float/double/fixed are so many
   bytes, a union is its branch index (a literal byte) followed by that branch, an array or map is
   an item count (a literal) followed by exactly that many items and the terminating 0, and bytes
   or strings are a literal length followed by exactly that many bytes (one alternative per
   length). Every choice is made by a literal byte, so the expression is unambiguous: where it
   matches, its match *is* the record's encoding, the same bytes fastavro consumes. Fields listed
   in ``captures`` become groups; ``constants`` pin a field to one value (a record with another
   value does not match).
3. A pattern bounds what it expresses (:class:`Limits`: value lengths, item counts; single-block
   arrays and maps; no recursive types). :meth:`RecordPattern.scan` tiles a block from its first
   byte with consecutive matches and stops at the first record the pattern does not match (a bound
   exceeded, a constant violated, corrupt bytes): :class:`FieldScanner` decodes the rest of that
   block with fastavro (:func:`~airflow_lakeformat.core.avro_blocks.decode_records`), which also raises what fastavro raises. So the
   result is always what fastavro decodes; the pattern only makes the common case fast. A scanner
   starts with small limits (fast to compile) and compiles larger ones once many records needed
   fastavro.
"""

from __future__ import annotations

import functools
import json
import re
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastavro.read import LOGICAL_READERS

from airflow_lakeformat.core.avro_blocks import decode_records, encode_varint, read_varint

Path = tuple[str, ...]
Decoder = Callable[[bytes, int], tuple[Any, int]]


class ScanUnsupported(Exception):
    """The file or schema is outside what the scanner handles; decode it with fastavro instead."""


# -- the record pattern -----------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What a pattern expresses: bigger limits match more records but compile slower."""

    length: int  # longest bytes/string value
    items: int  # most items in one array/map block
    long_items: int  # ... when the items hold bytes or strings
    item_length: int  # longest bytes/string inside array/map items


# Tier 0 compiles in about 10 ms and covers what pypaimon and this project write; tier 1 (about 0.2 s)
# covers Java's value statistics. A scanner moves to tier 1 once tier 0 left many records to fastavro.
TIERS = (Limits(63, 15, 4, 63), Limits(1023, 127, 8, 255))


def _literal(value: int) -> bytes:
    return re.escape(encode_varint(value))


def _varint_pattern(max_bytes: int) -> bytes:
    # Possessive where the engine has it (3.11+): a varint never gives bytes back, and not recording
    # the places to backtrack to makes a record about a sixth faster.
    possessive = b"+" if sys.version_info >= (3, 11) else b""
    return rb"[\x80-\xff]{0,%d}%s[\x00-\x7f]" % (max_bytes - 1, possessive)


_INT = _varint_pattern(5)
_LONG = _varint_pattern(10)


@functools.lru_cache(maxsize=8)
def _length_prefixed(max_length: int) -> bytes:
    """Exactly ``n`` bytes after the literal varint ``n``, for every n <= max_length."""
    return (
        b"(?:" + b"|".join(_literal(n) + (b".{%d}" % n if n else b"") for n in range(max_length + 1)) + b")"
    )


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = read_varint(data, pos)
    return data[pos : pos + size], pos + size


def _read_string(data: bytes, pos: int) -> tuple[str, int]:
    size, pos = read_varint(data, pos)
    return data[pos : pos + size].decode("utf-8"), pos + size


def _read_fixed(size: int) -> Decoder:
    return lambda data, pos: (data[pos : pos + size], pos + size)


def _read_float(data: bytes, pos: int) -> tuple[float, int]:
    return float(_FLOAT.unpack_from(data, pos)[0]), pos + 4


def _read_double(data: bytes, pos: int) -> tuple[float, int]:
    return float(_DOUBLE.unpack_from(data, pos)[0]), pos + 8


def _read_null(data: bytes, pos: int) -> tuple[None, int]:
    return None, pos


def _read_boolean(data: bytes, pos: int) -> tuple[bool, int]:
    return data[pos] == 1, pos + 1


_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_FIXED_PATTERNS = {
    "null": b"",
    "boolean": b"[\\x00\\x01]",
    "int": _INT,
    "long": _LONG,
    "float": b".{4}",
    "double": b".{8}",
}
_DECODERS: dict[str, Decoder] = {
    "null": _read_null,
    "boolean": _read_boolean,
    "int": read_varint,
    "long": read_varint,
    "float": _read_float,
    "double": _read_double,
    "bytes": _read_bytes,
    "string": _read_string,
}


def _span_string(span: bytes) -> str:
    # Patterns express lengths below 8192: a one- or two-byte varint.
    return (span[1:] if span[0] < 0x80 else span[2:]).decode("utf-8")


def _span_bytes(span: bytes) -> bytes:
    return span[1:] if span[0] < 0x80 else span[2:]


def _span_varint(span: bytes) -> int:
    first = span[0]
    if first < 0x80:
        return (first >> 1) ^ -(first & 1)
    return read_varint(span, 0)[0]


_SPAN_READERS: dict[str, Callable[[bytes], Any]] = {
    "string": _span_string,
    "bytes": _span_bytes,
    "int": _span_varint,
    "long": _span_varint,
}


class _Compiler:
    """Turns a writer schema into a pattern; records which groups capture which paths."""

    def __init__(self, limits: Limits, captures: Sequence[Path], constants: Mapping[Path, int]) -> None:
        self.limits = limits
        self.captures = set(captures)
        self.constants = dict(constants)
        self.groups: dict[Path, Callable[[bytes], Any]] = {}
        self.order: list[Path] = []
        self.named: dict[str, Any] = {}
        self.active: set[str] = set()

    def compile(self, schema: Any, path: Path, in_items: bool = False) -> tuple[bytes, Decoder]:
        pattern, decoder = self._compile(schema, path, in_items)
        if path in self.constants:
            value = self.constants.pop(path)
            if schema not in ("int", "long"):
                raise ScanUnsupported(f"constant on a {schema!r} field")
            pattern = _literal(value)
        if path in self.captures:
            self.captures.discard(path)
            kind = schema if isinstance(schema, str) else None
            self.groups[path] = _SPAN_READERS.get(kind or "", lambda span: decoder(span, 0)[0])
            self.order.append(path)
            pattern = b"(" + pattern + b")"
        return pattern, decoder

    def _compile(self, schema: Any, path: Path, in_items: bool) -> tuple[bytes, Decoder]:
        if isinstance(schema, str):
            if schema in _FIXED_PATTERNS:
                return _FIXED_PATTERNS[schema], _DECODERS[schema]
            if schema in ("bytes", "string"):
                limit = self.limits.item_length if in_items else self.limits.length
                return _length_prefixed(limit), _DECODERS[schema]
            if schema not in self.named:
                raise ScanUnsupported(f"unknown type {schema!r}")
            if schema in self.active:
                raise ScanUnsupported(f"recursive type {schema!r}")
            return self._compile(self.named[schema], path, in_items)
        if isinstance(schema, list):
            return self._union(schema, path, in_items)
        if not isinstance(schema, dict):
            raise ScanUnsupported(f"schema {schema!r}")
        kind = schema.get("type")
        if kind in _DECODERS:
            pattern, decoder = self._compile(kind, path, in_items)
            logical = schema.get("logicalType")
            reader = LOGICAL_READERS.get(f"{kind}-{logical}") if logical else None
            if reader is None:
                return pattern, decoder

            def logical_decoder(data: bytes, pos: int) -> tuple[Any, int]:
                value, pos = decoder(data, pos)
                return reader(value, schema, schema), pos

            return pattern, logical_decoder
        if kind in ("record", "error"):
            return self._record(schema, path, in_items)
        if kind == "array":
            item, item_decoder = self.compile(schema["items"], (*path, "[]"), in_items=True)
            return self._block(item), _block_reader(
                lambda data, pos, values: _append(values, *item_decoder(data, pos)), list
            )
        if kind == "map":
            value, value_decoder = self.compile(schema["values"], (*path, "{}"), in_items=True)

            def entry(data: bytes, pos: int, values: dict[str, Any]) -> int:
                key, pos = _read_string(data, pos)
                values[key], pos = value_decoder(data, pos)
                return pos

            return self._block(_length_prefixed(self.limits.item_length) + value), _block_reader(entry, dict)
        if kind == "fixed":
            self._name(schema)
            size = int(schema["size"])
            return b".{%d}" % size, _read_fixed(size)
        if kind == "enum":
            self._name(schema)
            symbols = list(schema["symbols"])

            def enum_decoder(data: bytes, pos: int) -> tuple[str, int]:
                index, pos = read_varint(data, pos)
                return symbols[index], pos

            return b"(?:" + b"|".join(_literal(i) for i in range(len(symbols))) + b")", enum_decoder
        raise ScanUnsupported(f"type {kind!r}")

    def _name(self, schema: Mapping[str, Any]) -> str:
        name = str(schema.get("name", ""))
        namespace = schema.get("namespace")
        if namespace and "." not in name:
            name = f"{namespace}.{name}"
        if name:
            self.named[name] = schema
            self.named.setdefault(name.rsplit(".", 1)[-1], schema)
        return name

    def _record(self, schema: Mapping[str, Any], path: Path, in_items: bool) -> tuple[bytes, Decoder]:
        name = self._name(schema)
        if name in self.active:
            raise ScanUnsupported(f"recursive type {name!r}")
        self.active.add(name)
        parts = []
        decoders = []
        for field in schema.get("fields", []):
            pattern, decoder = self.compile(field["type"], (*path, field["name"]), in_items)
            parts.append(pattern)
            decoders.append((field["name"], decoder))
        self.active.discard(name)

        def record_decoder(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
            record = {}
            for field_name, decoder in decoders:
                record[field_name], pos = decoder(data, pos)
            return record, pos

        return b"".join(parts), record_decoder

    def _union(self, branches: list[Any], path: Path, in_items: bool) -> tuple[bytes, Decoder]:
        if len(branches) > 63:
            raise ScanUnsupported("union of more than 63 branches")
        alternatives = []
        decoders = []
        for index, branch in enumerate(branches):
            captured = len(self.order)
            pattern, decoder = self._compile(branch, path, in_items)
            if len(self.order) > captured:
                # Fields captured inside this branch (the record of ["null", record]): only it may match,
                # so a group never comes back empty; the other branches are fastavro's to decode.
                return b"(?:" + _literal(index) + pattern + b")", decoder
            alternatives.append(_literal(index) + pattern)
            decoders.append(decoder)

        def union_decoder(data: bytes, pos: int) -> tuple[Any, int]:
            index, pos = read_varint(data, pos)
            return decoders[index](data, pos)

        return b"(?:" + b"|".join(alternatives) + b")", union_decoder

    def _block(self, item: bytes) -> bytes:
        """A one-block array or map: the literal count n, exactly n items, the terminating 0."""
        most = self.limits.long_items if len(item) > 64 else self.limits.items
        counts = [_literal(n) + b"(?:" + item + b"){%d}" % n for n in range(1, most + 1)]
        return b"(?:\\x00|(?:" + b"|".join(counts) + b")\\x00)"


def _append(values: list[Any], value: Any, pos: int) -> int:
    values.append(value)
    return pos


def _block_reader(entry: Callable[[bytes, int, Any], int], empty: Callable[[], Any]) -> Decoder:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        values = empty()
        count, pos = read_varint(data, pos)
        while count:
            if count < 0:
                count = -count
                _, pos = read_varint(data, pos)  # the block's byte size
            for _ in range(count):
                pos = entry(data, pos, values)
            count, pos = read_varint(data, pos)
        return values, pos

    return read


class RecordPattern:
    """A compiled writer schema: ``pattern`` matches one record, group ``i + 1`` captures ``paths[i]``."""

    def __init__(
        self,
        writer_schema: Any,
        captures: Sequence[Path],
        constants: Mapping[Path, int] | None = None,
        limits: Limits = TIERS[0],
    ) -> None:
        compiler = _Compiler(limits, captures, constants or {})
        top = writer_schema
        prefix = b""
        if isinstance(top, list):
            # Paimon 0.8 wrote the top level as ["null", record]: only the record branch matches.
            index = next((i for i, t in enumerate(top) if isinstance(t, dict)), None)
            if index is None:
                raise ScanUnsupported("top-level union without a record")
            prefix, top = _literal(index), top[index]
        body, _ = compiler.compile(top, ())
        if compiler.captures or compiler.constants:
            missing = sorted(compiler.captures | set(compiler.constants))
            raise ScanUnsupported(f"fields not in the writer schema: {missing}")
        pattern = re.compile(prefix + body, re.DOTALL)
        if pattern.match(b""):
            raise ScanUnsupported("a record can be empty")
        self.pattern = pattern
        self.paths: list[Path] = list(captures)
        group = {path: index for index, path in enumerate(compiler.order)}
        # (reader, group index) in the order the captures were asked for.
        self._plan = [(compiler.groups[path], group[path]) for path in captures]

    def scan(self, data: bytes, count: int) -> tuple[list[re.Match[bytes]], int]:
        """Matches of the first records of ``data`` (at most ``count``) and where the last one ends.

        Fewer than ``count`` matches: the record at the returned position is one the pattern does
        not express; decode from there with fastavro.
        """
        matches: list[re.Match[bytes]] = []
        if count <= 0:
            return matches, 0
        pos = 0
        append = matches.append
        for match in self.pattern.finditer(data):
            if match.start() != pos:
                break
            append(match)
            pos = match.end()
            if len(matches) == count:
                break
        return matches, pos

    def group_of(self, path: Path) -> tuple[int, Callable[[bytes], Any]]:
        """(group number, reader of its bytes) of a captured path, for loops that want one field fast."""
        reader, index = self._plan[self.paths.index(path)]
        return index + 1, reader

    def values(self, match: re.Match[bytes]) -> tuple[Any, ...]:
        """The captured fields of one match (in the order asked for), decoded as fastavro decodes them."""
        groups = match.groups()
        return tuple(read(groups[index]) for read, index in self._plan)


_patterns: dict[
    tuple[bytes, tuple[Path, ...], tuple[tuple[Path, int], ...], Limits], RecordPattern | None
] = {}


def record_pattern(
    schema_json: bytes,
    captures: Sequence[Path],
    constants: Mapping[Path, int] | None = None,
    limits: Limits = TIERS[0],
) -> RecordPattern | None:
    """The compiled pattern for a writer schema (cached per process); None if it cannot be expressed."""
    key = (schema_json, tuple(captures), tuple(sorted((constants or {}).items())), limits)
    if key not in _patterns:
        try:
            _patterns[key] = RecordPattern(json.loads(schema_json), captures, constants, limits)
        except (ScanUnsupported, ValueError, KeyError, TypeError, re.error, RecursionError):
            _patterns[key] = None
    return _patterns[key]


class FieldScanner:
    """Captured fields of every record of one writer schema, block by block, exact.

    The pattern decodes what it expresses; the rest of a block goes to fastavro (``reader_schema``
    projects that decode), whose records are turned into the same tuples. After
    :data:`ESCALATE_AFTER` records went to fastavro, the scanner compiles the next tier. ``limits`` fixes
    the limits instead (no escalation), for files whose shape the caller knows (Iceberg's absolute paths
    and per-column statistics).
    """

    ESCALATE_AFTER = 20_000

    def __init__(
        self,
        schema_json: bytes,
        captures: Sequence[Path],
        constants: Mapping[Path, int] | None = None,
        reader_schema: Any = None,
        limits: Limits | None = None,
    ) -> None:
        self.schema_json = schema_json
        self.captures = tuple(captures)
        self.constants = dict(constants or {})
        self.reader_schema = reader_schema
        # Fixed limits never escalate: the caller knows what its files need.
        self.tier = 0 if limits is None else len(TIERS)
        self.pattern = record_pattern(schema_json, self.captures, self.constants, limits or TIERS[0])
        self.fallback_records = 0

    def scan(self, data: bytes, count: int) -> tuple[list[re.Match[bytes]], list[dict[str, Any]]]:
        """(matches of the records the pattern takes, fastavro records of the rest of the block)."""
        if self.pattern is None:
            return [], decode_records(self.schema_json, data, count, self.reader_schema)
        matches, pos = self.pattern.scan(data, count)
        if len(matches) == count:
            return matches, []
        rest = decode_records(self.schema_json, data[pos:], count - len(matches), self.reader_schema)
        self._fell_back(len(rest))
        return matches, rest

    def rows(self, data: bytes, count: int) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
        """(captured values of the records the pattern matched, fastavro records of the rest), in order."""
        matches, rest = self.scan(data, count)
        if not matches:
            return [], rest
        values = self.pattern.values  # type: ignore[union-attr]  # matches imply a pattern
        return [values(m) for m in matches], rest

    def row_of(self, record: Mapping[str, Any] | None) -> tuple[Any, ...]:
        """The captured fields of a record fastavro decoded, as :meth:`rows` gives them."""
        return tuple(value_at(record, path) for path in self.captures)

    def _fell_back(self, records: int) -> None:
        self.fallback_records += records
        if self.fallback_records >= self.ESCALATE_AFTER and self.tier + 1 < len(TIERS):
            self.tier += 1
            self.fallback_records = 0
            better = record_pattern(self.schema_json, self.captures, self.constants, TIERS[self.tier])
            self.pattern = better or self.pattern


def value_at(record: Mapping[str, Any] | None, path: Path) -> Any:
    """The value of ``path`` in a record fastavro decoded (None through a null record)."""
    value: Any = record
    for name in path:
        if value is None:
            return None
        value = value[name]
    return value
