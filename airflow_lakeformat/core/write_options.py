"""The arguments every write of the facade shares: what an overwrite asks for, the commit identity property,
the fields of a write that committed nothing. Imports no format at module level (each function loads the one it
parses with).

* ``overwrite``: None/False/"" append; ``"*"`` the whole table; ``"k=v[,k=v]"`` or a dict one partition (Paimon's
  form, parsed by Paimon's ``parse_overwrite_spec``); ``True`` or ``"dynamic"`` (Iceberg) the partitions the
  rows fall into. :func:`overwrite_filter` reads it for Paimon, :func:`iceberg_overwrite` for Iceberg, where
  ``k=v`` and ``*`` become filters and ``overwrite_filter`` text is a filter of its own.

Example:
    >>> iceberg_overwrite("dt=2024-01-01")  # doctest: +SKIP
    (True, '"dt" = \'2024-01-01\'')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from airflow_lakeformat.core.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

#: ``overwrite=DYNAMIC_OVERWRITE`` (or True): replace the partitions the written rows fall into (Iceberg).
DYNAMIC_OVERWRITE = "dynamic"
Overwrite = Mapping[str, Any] | str | bool | None
COMMIT_IDENTIFIER_PROPERTY = "lakeformat.commit-identifier"
Staged = str | Mapping[str, Any]
ReadRows = Callable[[], "pa.Table"]
EMPTY_WRITE = {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0}


def overwrite_filter(value: Overwrite) -> tuple[bool, dict[str, str | None] | None]:
    """(overwrite?, partition filter): ``"*"`` is the whole table, ``"k=v,k2=v2"`` or a dict one partition.

    Raises:
        ValueError: a malformed spec, or a dynamic overwrite (``True``/``"dynamic"``), which names no partition.
    """
    from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec

    if value is None or value is False or value == {} or (isinstance(value, str) and not value.strip()):
        return False, None
    if _is_dynamic(value):
        raise UsageError(
            "overwrite: a dynamic partition overwrite (the partitions of the rows) is for Iceberg tables; name "
            "the Paimon partition (k=v[,k=v]) or '*'"
        )
    return True, parse_overwrite_spec(cast("Mapping[str, Any] | str", value))


def _is_dynamic(value: Overwrite) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == DYNAMIC_OVERWRITE)


def iceberg_overwrite(value: Overwrite, row_filter: str | None = None) -> tuple[bool, str | None]:
    """(overwrite?, Iceberg filter text or None for a dynamic overwrite) of an Iceberg write's arguments.

    Raises:
        ValueError: both an overwrite spec and a filter, or a malformed spec.
    """
    from airflow_lakeformat.core.iceberg.write.overwrite_scope import filter_from_values

    if row_filter is not None and not row_filter.strip():
        raise UsageError("overwrite_filter: an empty filter (use '*' for the whole table)")
    wanted = (
        value is not None
        and value is not False
        and value != {}
        and not (isinstance(value, str) and not value.strip())
    )
    if row_filter is not None:
        if wanted:
            raise UsageError(
                "overwrite and overwrite_filter: give one of them (--overwrite or --overwrite-filter)"
            )
        return True, row_filter
    if not wanted:
        return False, None
    if _is_dynamic(value):
        return True, None
    replace, partition = overwrite_filter(value)
    return replace, "*" if partition is None else filter_from_values(partition)


def dry_run_fields(data: pa.Table, started: float) -> dict[str, Any]:
    """The fields of a write that read ``data`` and committed nothing (a dry run)."""
    return {
        **EMPTY_WRITE,
        "snapshotId": None,
        "alreadyCommitted": False,
        "sourceRows": data.num_rows,
        "durationSeconds": round(time.monotonic() - started, 3),
    }
