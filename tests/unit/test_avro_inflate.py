"""``avro_blocks.inflate``: ISA-L's inflate where installed, zlib otherwise, with the same results.

The bulk Iceberg reads inflate every deflate block through it, so it must give zlib's bytes for every
stream and fail (with one of ``INFLATE_ERRORS``) wherever zlib fails: a truncated or garbled block is
then decoded by fastavro, which names the file.
"""

from __future__ import annotations

import random
import zlib

import pytest

from airflow_lakeformat.core import avro_blocks


def _deflate(data: bytes, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def _samples() -> list[bytes]:
    rng = random.Random(7)
    row = b"file:/wh/t/metadata/" + bytes(rng.choice(b"0123456789abcdef-") for _ in range(40)) + b"-m0.avro"
    return [
        b"",
        b"x",
        row,
        row * 2000,  # a manifest list: the same shape of row, 2,000 times
        bytes(rng.getrandbits(8) for _ in range(5000)),  # incompressible: stored blocks
        bytes(rng.choice(b"ab") for _ in range(100_000)),
    ]


def test_isal_is_the_inflate_in_use_here() -> None:
    """The dependency is installed in the test environment, so the fast path is what the suite runs."""
    assert avro_blocks._isal_zlib is not None
    assert len(avro_blocks.INFLATE_ERRORS) == 2


@pytest.mark.parametrize("use_isal", [True, False])
def test_inflate_gives_zlibs_bytes(use_isal: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not use_isal:
        monkeypatch.setattr(avro_blocks, "_isal_zlib", None)
    for data in _samples():
        for level in (0, 1, 6, 9):
            stream = _deflate(data, level)
            assert avro_blocks.inflate(stream) == data == zlib.decompress(stream, -15)
            assert avro_blocks.inflate_blocks([(3, stream), (0, stream)]) == [(3, data), (0, data)]


@pytest.mark.parametrize("use_isal", [True, False])
def test_inflate_fails_where_zlib_fails(use_isal: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not use_isal:
        monkeypatch.setattr(avro_blocks, "_isal_zlib", None)
    stream = _deflate(_samples()[3], 6)
    for bad in (stream[: len(stream) // 2], stream[:-1], b"", b"\xff\xff\xff", b"\x07" + stream[1:]):
        with pytest.raises(zlib.error):
            zlib.decompress(bad, -15)
        with pytest.raises(avro_blocks.INFLATE_ERRORS):
            avro_blocks.inflate(bad)
        with pytest.raises(avro_blocks.INFLATE_ERRORS):
            avro_blocks.inflate_blocks([(1, stream), (1, bad)])
