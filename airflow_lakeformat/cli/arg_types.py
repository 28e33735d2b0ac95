"""The flag types of the ``lakeformat`` parser: counts, sizes, durations, ``--older-than``.

Each turns one command-line value into what the facade takes, or raises ``argparse.ArgumentTypeError`` (a
usage mistake, exit 2). They import only ``core.units`` up front, so ``--help`` stays fast (see
``cli/parser.py``).
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from airflow_lakeformat.core.units import parse_duration, parse_memory_size


def count(text: str) -> int:
    """A number of things (snapshots, paths): a whole number, not negative (else a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r} (a whole number)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid count: {text} (must not be negative)")
    return value


def _refuse_bare_number(text: str) -> None:
    """A duration flag without a unit is a usage mistake: ``--older-than 5`` would be 5 ms (Paimon's
    rule for option values), which nobody means on a command line."""
    if text.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} has no unit: give one, e.g. '{text.strip()} d', '{text.strip()} h' or '{text.strip()} ms'"
        )


def memory_size(text: str) -> int:
    """A ``--target-file-size`` value (``"128 mb"``); a bad one is a usage mistake (exit 2)."""
    try:
        return parse_memory_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration(text: str) -> timedelta:
    _refuse_bare_number(text)
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def older_than_argument(text: str) -> timedelta | str:
    """``--older-than``: a duration (``5 d``), or for Iceberg tables an ISO-8601 timestamp (kept as text).

    The check is the facade's (``core/maintenance/facade_base.py``), format-neutral: which format takes a
    timestamp is decided when the table is known.
    """
    from airflow_lakeformat.core.errors import UsageError
    from airflow_lakeformat.core.maintenance.facade_base import expiry_older_than

    _refuse_bare_number(text)
    try:
        value = expiry_older_than(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("older_than: ")) from exc
    assert isinstance(value, (timedelta, str))  # text in, a duration or the timestamp's text out
    return value
