"""Detect the Iceberg 1.4.0 ``split_offsets`` corruption in manifests (reference 4.7).

Iceberg 1.4.0 (PR #8336) cached split offsets in a reused Avro container, so every rewritten entry
after the first got the first entry's offsets; manifest merges, ``rewrite_manifests`` and overwrite
filtering persisted them (apache/iceberg #8863, #9689; fixed in 1.4.1/1.4.2 by #8834, #8860, #8925). Java
1.10.2 ``BaseFile.hasWellDefinedOffsets`` now ignores lists whose last offset is ``>= file_size_in_bytes``.

Checks, per live entry with non-null ``split_offsets`` (spec: "Must be sorted ascending"):

* ``out-of-bounds``: an offset is negative or ``>= file_size_in_bytes``;
* ``not-ascending``: the list is not strictly ascending;
* ``copied``: within one manifest, the same list of two or more offsets is carried by several different
  files of different sizes (the copy-from-first-entry signature). One-offset lists are exempt: every
  single-row-group Parquet file legitimately has ``[4]``.

The footer comparison (offsets vs row-group starts) is not done here: it needs every data file's footer.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.iceberg.metadata.entries import LiveFile

DEFAULT_SAMPLE_SIZE = 10


def offsets_problem(f: LiveFile) -> str | None:
    """``"out-of-bounds"``, ``"not-ascending"`` or None for one file's own offsets."""
    offsets = f.split_offsets
    if not offsets:
        return None
    if any(o < 0 or o >= f.file_size for o in offsets):
        return "out-of-bounds"
    if any(b <= a for a, b in itertools.pairwise(offsets)):
        return "not-ascending"
    return None


@dataclass
class ManifestSplitReport:
    """Split-offset findings of one manifest: counts plus a capped sample of files."""

    manifest: str
    invalid_count: int = 0
    copied_count: int = 0
    sample: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "manifest": self.manifest,
            "invalidFiles": self.invalid_count,
            "copiedFiles": self.copied_count,
            "sample": self.sample,
        }


def check_manifest(
    manifest_path: str, files: Sequence[LiveFile], sample_size: int = DEFAULT_SAMPLE_SIZE
) -> ManifestSplitReport | None:
    """Check the live files of one manifest; None when nothing is wrong.

    Args:
        manifest_path: The manifest's path (for the report).
        files: Its live entries.
        sample_size: How many offending files to list (all are counted).
    """
    report = ManifestSplitReport(manifest_path)
    offending: dict[str, str] = {}
    for f in files:
        problem = offsets_problem(f)
        if problem is not None and f.path not in offending:
            offending[f.path] = problem
            report.invalid_count += 1
            if len(report.sample) < sample_size:
                report.sample.append(_sample(f, problem))
    sharing: dict[tuple[int, ...], list[LiveFile]] = defaultdict(list)
    for f in files:
        if f.split_offsets and len(f.split_offsets) >= 2:
            sharing[f.split_offsets].append(f)
    for group in sharing.values():
        if len({f.path for f in group}) < 2 or len({f.file_size for f in group}) < 2:
            continue
        for f in group:
            if f.path in offending:
                continue
            offending[f.path] = "copied"
            report.copied_count += 1
            if len(report.sample) < sample_size:
                report.sample.append(_sample(f, "copied"))
    return report if offending else None


def _sample(f: LiveFile, problem: str) -> dict[str, Any]:
    return {
        "path": f.path,
        "problem": problem,
        "fileSize": f.file_size,
        "splitOffsets": list(f.split_offsets or ()),
    }


def split_offsets_check(
    per_manifest: Sequence[tuple[str, Sequence[LiveFile]]],
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    max_manifests: int = 100,
) -> dict[str, Any]:
    """The split-offset section of the inspect document.

    Args:
        per_manifest: (manifest path, its live files) for every manifest of the snapshot.
        sample_size: Offending files listed per manifest.
        max_manifests: Manifests listed (all are counted).

    Returns:
        ``{"checkedFiles", "filesWithOffsets", "badManifestCount", "badFileCount", "manifests": [{manifest,
        invalidFiles, copiedFiles, sample: [{path, problem, fileSize, splitOffsets}]}], "manifestsTruncated"}``.

    Example:
        >>> split_offsets_check([(m.manifest_path, files) for m, files in decoded])["badFileCount"]  # doctest: +SKIP
        0
    """
    reports = []
    checked = with_offsets = 0
    for manifest_path, files in per_manifest:
        checked += len(files)
        with_offsets += sum(1 for f in files if f.split_offsets)
        found = check_manifest(manifest_path, files, sample_size)
        if found is not None:
            reports.append(found)
    return {
        "checkedFiles": checked,
        "filesWithOffsets": with_offsets,
        "badManifestCount": len(reports),
        "badFileCount": sum(r.invalid_count + r.copied_count for r in reports),
        "manifests": [r.to_json() for r in reports[:max_manifests]],
        "manifestsTruncated": len(reports) > max_manifests,
    }
