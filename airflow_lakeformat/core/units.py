"""Durations and sizes as Paimon writes them (``"1 h"``, ``"30min"``, ``"8 mb"``), for every argument of both formats.

Paimon's ``TimeUtils`` and ``MemorySize`` syntax: a whole number, optional blanks, then a unit. The same
syntax is accepted for Iceberg arguments (``--older-than 5 d``), so a user learns one.
"""

from __future__ import annotations

import re
from datetime import timedelta

DURATION_HELP = (
    "a whole number and a unit: ms, s, min, h or d, e.g. '30 min', '1 h', '7 d'; a bare number is ms"
)

#: Units parse_duration accepts, in seconds (the trigger form builds its duration pattern from them).
DURATION_UNITS = {
    "ns": 1e-9, "nano": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "µs": 1e-6, "micro": 1e-6, "micros": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip

_MEMORY_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip

_NUMBER_AND_UNIT = re.compile(r"^\s*(\d+)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """Parse Paimon's durations: ``"1 h"``, ``"30min"``, ``"100 ms"``, ``"2d"``; a bare number is ms."""
    match = _NUMBER_AND_UNIT.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} ({DURATION_HELP})")
    unit = match[2].lower() or "ms"
    if unit not in DURATION_UNITS:
        raise ValueError(f"unknown duration unit {match[2]!r} in {text!r} ({DURATION_HELP})")
    return timedelta(seconds=int(match[1]) * DURATION_UNITS[unit])


def parse_memory_size(text: str) -> int:
    """Parse Paimon's memory sizes (``"8 mb"``, ``"16MB"``, ``"1024"``) into bytes, 1024-based."""
    match = _NUMBER_AND_UNIT.match(text)
    if not match or match[2].lower() not in _MEMORY_UNITS:
        raise ValueError(
            f"not a memory size: {text!r} (a whole number and a unit: b, kb, mb, gb or tb, e.g. '128 mb')"
        )
    return int(match[1]) * _MEMORY_UNITS[match[2].lower()]


def parse_bool(text: str) -> bool:
    """``"true"`` or ``"false"``, any case."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"not a boolean: {text!r}")
