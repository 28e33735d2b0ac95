"""The commit-time manifest merge policy of Java's ``ManifestMergeManager`` (reference 3c), as a plan.

Java (``core/.../MergingSnapshotProducer.java``, ``ManifestMergeManager.java``, ``util/BinPacking.java``)
merges manifests on every ``MergingSnapshotProducer`` commit. For a commit that brings no manifest of its
own (our "minor" manifest compaction), the steps are:

1. Keep only manifests that may hold live files: ``added_files_count`` or ``existing_files_count`` non-zero
   (null counts mean "maybe"), as ``MergingSnapshotProducer.apply`` filters before merging.
2. ``first`` is the first manifest of the list (the newest; in a real commit, the commit's new manifest).
3. Group by ``partition_spec_id``, highest spec id first (a ``TreeMap`` with ``reverseOrder``), each group
   in list order.
4. Pack each group with ``ListPacker(target, lookback=1, largestBinFirst=false).packEnd(group, length)``:
   the list is reversed, packed greedily (a manifest joins the open bin if the bin's total length plus its
   own stays ``<= target``, else it opens a new bin), then bins and their items are reversed back. The
   under-filled bin therefore ends up first, holding the newest manifests, to be merged next time.
5. Per bin: one manifest is kept as it is; the bin holding ``first`` is merged only if it has at least
   ``commit.manifest.min-count-to-merge`` manifests (default 100), else its manifests are kept; every other
   bin of two or more manifests is merged, whatever its count.
6. A merged bin becomes one manifest (no size cap): entries in bin order, DELETED entries dropped (they
   were deleted by earlier snapshots), everything else EXISTING with its snapshot id and sequence numbers.

``commit.manifest-merge.enabled`` (Java default true; pyiceberg's is false) switches it all off. Data and
delete manifests have separate managers in Java; this plan is applied to data manifests only (see
``manifest_compaction``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.manifest import ManifestFile

T = TypeVar("T")


def pack_end(items: Sequence[T], target: int, weight: Callable[[T], int]) -> list[list[T]]:
    """Java ``ListPacker(target, 1, false).packEnd(items, weight)``: greedy bins filled from the end.

    Args:
        items: The items in list order.
        target: The bin weight limit (an item heavier than it gets a bin of its own).
        weight: Item weight.

    Returns:
        The bins, in list order, each in list order.

    Example:
        >>> pack_end([5, 5, 5], 10, lambda x: x)
        [[5], [5, 5]]
    """
    bins: list[list[T]] = []
    current: list[T] = []
    current_weight = 0
    for item in reversed(items):
        w = weight(item)
        if current and current_weight + w > target:
            bins.append(current)
            current, current_weight = [], 0
        current.append(item)
        current_weight += w
    if current:
        bins.append(current)
    return [list(reversed(b)) for b in reversed(bins)]


@dataclass(frozen=True)
class MergeBin:
    """One output slot of the merge: ``merge`` true -> the manifests become one, else they are kept as is."""

    spec_id: int
    manifests: tuple[ManifestFile, ...]
    merge: bool


def has_live_files(manifest: ManifestFile) -> bool:
    """Java ``hasAddedFiles() || hasExistingFiles()`` (a null count means it may have some)."""
    return manifest.has_added_files() or manifest.has_existing_files()


def plan_merge(
    manifests: Sequence[ManifestFile], *, target_size_bytes: int, min_count_to_merge: int
) -> list[MergeBin]:
    """The bins of Java's merge for a manifest list to which nothing new is added (module docstring).

    Args:
        manifests: The data manifests of the snapshot, in manifest-list order.
        target_size_bytes: ``commit.manifest.target-size-bytes``.
        min_count_to_merge: ``commit.manifest.min-count-to-merge``.

    Returns:
        The bins in output order (spec id descending, then bin order). Manifests without live files are
        left out (dropped, step 1).

    Example:
        >>> bins = plan_merge(manifest_list, target_size_bytes=8 << 20, min_count_to_merge=100)  # doctest: +SKIP
        >>> [len(b.manifests) for b in bins if b.merge]  # doctest: +SKIP
    """
    live = [m for m in manifests if has_live_files(m)]
    if not live:
        return []
    first = live[0]
    groups: dict[int, list[ManifestFile]] = {}
    for manifest in live:
        groups.setdefault(manifest.partition_spec_id, []).append(manifest)
    result = []
    for spec_id in sorted(groups, reverse=True):
        for bin_ in pack_end(groups[spec_id], target_size_bytes, lambda m: m.manifest_length):
            contains_first = any(m is first for m in bin_)
            merge = len(bin_) > 1 and not (contains_first and len(bin_) < min_count_to_merge)
            result.append(MergeBin(spec_id, tuple(bin_), merge))
    return result
