"""The health score: 100 minus weighted penalties, Amoro's health score adapted to both formats.

Amoro's self-optimizing scores a table by three read costs, weighted small files 40, equality deletes 40,
position deletes 20. The score here keeps the weights and gives each a load between 0 and 1:

- **small files (40)**: the share of live data files that a compaction would pick: small files (under
  ``small-file-ratio`` x target size) in the partitions (Paimon append tables: buckets) holding at least
  ``min-small-files`` of them. One small file per partition, what a compaction leaves, costs nothing.
- **delete load (40)**: Iceberg: equality-delete records over data records, divided by ``delete-ratio``;
  Paimon primary-key tables: the merge-on-read load, the share of buckets with at least ``max-sorted-runs``
  sorted runs (level-0 files are each a run, every non-empty higher level one more).
- **position deletes (20)**: Iceberg: position-delete records (deletion vectors included) over data records,
  divided by ``delete-ratio``; Paimon: the DELETE records the data files' metadata counts over their records,
  divided by ``delete-ratio``.

Each load is capped at 1; ``score = round(100 - 40*small - 40*deletes - 20*positions)``. A table whose
files are compacted and carry no deletes scores 100. Snapshots, manifests and old partitions cost
planning time and storage, not reads: they do not lower the score, they give recommendations
(``core/health/assess.py``).

This module is neutral: it imports no format.

Example:
    >>> health_score(small=0.5, deletes=0.0, positions=0.25)
    (75, {'smallFiles': 20.0, 'deleteLoad': 0.0, 'positionDeletes': 5.0})
"""

from __future__ import annotations

#: Points each load takes off at its maximum (Amoro's weights).
WEIGHTS = {"smallFiles": 40, "deleteLoad": 40, "positionDeletes": 20}


def ratio_load(part: int, whole: int, limit: float) -> float:
    """``part / whole / limit`` capped at 1 (0 when ``whole`` is 0)."""
    if whole <= 0 or part <= 0:
        return 0.0
    return min(1.0, part / whole / limit)


def health_score(*, small: float, deletes: float, positions: float) -> tuple[int, dict[str, float]]:
    """The score and the points each load took off.

    Args:
        small: the small-file load, 0..1.
        deletes: the delete load (Iceberg equality deletes; Paimon sorted runs), 0..1.
        positions: the position-delete load (Paimon: DELETE records), 0..1.

    Returns:
        ``(score, {"smallFiles", "deleteLoad", "positionDeletes"})`` with penalties rounded to 2 places.
    """
    loads = {"smallFiles": small, "deleteLoad": deletes, "positionDeletes": positions}
    penalties = {name: round(WEIGHTS[name] * min(1.0, max(0.0, load)), 2) for name, load in loads.items()}
    return max(0, min(100, round(100 - sum(penalties.values())))), penalties
