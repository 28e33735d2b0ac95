"""Orphan-file cleanup of pypaimon-written tables, locally and on SeaweedFS S3.

Orphans are planted in every location cleanup lists (``manifest/``, ``index/``, ``statistics/``,
bucket directories of several partitions, a new bucket and a new partition directory, a crashed temp
file in ``snapshot/``), old and fresh, next to bystanders that sit outside Paimon's layout and are
never candidates. Every file the table had before planting is referenced (pypaimon leaves no
orphans), so the run must remove exactly the planted old orphans; pypaimon must then read the same
rows at every snapshot and tag.

Locally, old files get an mtime 3 days back (``os.utime``), and the table's own files too, so that
they are candidates that only the used set protects. On S3 an mtime cannot be set: a run with the
real clock shows that fresh files stay, then a run with the clock 3 days ahead makes every file old.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.live_files import live_files
from airflow_lakeformat.core.paimon.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.paimon.table import Table
from tests.interop.test_expiry_interop import (
    STORAGES,
    Placed,
    Pristine,
    References,
    assert_matches_core,
    build_pristine,
    place,
    read_rows,
    selectors_for,
    tree,
)

pytestmark = pytest.mark.interop

TABLES = ("pk_overwrite_history", "append_partitioned")  # 1 and 2 partition levels, escaped values
DAYS_AGO = 3 * 86400
CANDIDATE_METADATA_DIRS = (paths.MANIFEST_DIR, paths.INDEX_DIR, paths.STATISTICS_DIR)


def days_ahead() -> float:
    """An injected clock that makes every file on S3 (whose mtime cannot be set) old enough."""
    return time.time() + DAYS_AGO


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """The tables, and pypaimon's rows at the latest snapshot, every snapshot and every tag."""
    return build_pristine(
        tmp_path_factory.mktemp("orphans-warehouse"),
        {name: lambda s: selectors_for(s["snapshots"], s["tags"]) for name in TABLES},
    )


@dataclass
class Planted:
    old: dict[str, str] = field(default_factory=dict)  # relative path -> kind cleanup reports
    fresh: dict[str, str] = field(default_factory=dict)
    bystanders: list[str] = field(default_factory=list)  # outside the layout: never candidates
    empty_old_dirs: list[str] = field(default_factory=list)  # local only

    def counts(self, *groups: dict[str, str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for group in groups:
            for kind in group.values():
                out[kind] = out.get(kind, 0) + 1
        return dict(sorted(out.items()))


def unique(prefix: str, suffix: str = "") -> str:
    return f"{prefix}{uuid.uuid4()}{suffix}"


def plant(table: Table) -> Planted:
    """Plant orphans and bystanders; returns their relative paths (nothing is aged here)."""
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    bucket_dirs = sorted({os.path.dirname(f.path) for f in live_files(table, latest)})
    partition_dirs = sorted({os.path.dirname(d) for d in bucket_dirs})
    assert len(partition_dirs) >= 3, "orphans go to several partitions"
    keys = table.schema.partition_keys
    new_partition = "/".join(f"{key}=orphan-partition" for key in keys)
    planted = Planted()
    metadata = {
        paths.MANIFEST_DIR: ("manifest-", "manifest"),
        paths.INDEX_DIR: ("index-", "index-file"),
        paths.STATISTICS_DIR: ("stat-", "statistics"),
    }
    for group in (planted.old, planted.fresh):
        for directory, (prefix, kind) in metadata.items():
            group[f"{directory}/{unique(prefix, '-0')}"] = kind
        group[f"{paths.SNAPSHOT_DIR}/.snapshot-{latest.id + 1}.{uuid.uuid4()}.tmp"] = "stale-temp-file"
    planted.old[f"{paths.MANIFEST_DIR}/{unique('manifest-list-', '-0')}"] = "manifest"
    # One bucket directory in each partition directory, so every partition is listed.
    for partition in partition_dirs:
        bucket = next(d for d in bucket_dirs if os.path.dirname(d) == partition)
        planted.old[f"{bucket}/{unique('data-', '-0.parquet')}"] = "data-file"
    planted.old[f"{partition_dirs[0]}/bucket-7/{unique('data-', '-0.parquet')}"] = "data-file"
    planted.old[f"{new_partition}/bucket-0/{unique('data-', '-0.parquet')}"] = "data-file"
    for bucket in bucket_dirs[-2:]:
        planted.fresh[f"{bucket}/{unique('data-', '-0.parquet')}"] = "data-file"
    planted.bystanders = [
        unique("notes-", ".txt"),  # the table root
        f"{partition_dirs[0]}/{unique('stray-', '.parquet')}",  # a partition directory itself
        f"{bucket_dirs[0]}/nested/{unique('data-', '-0.parquet')}",  # below a bucket directory
        f"not-a-partition/bucket-0/{unique('data-', '-0.parquet')}",  # no key=value directory
    ]
    for relative in [*planted.old, *planted.fresh, *planted.bystanders]:
        table.io.write_bytes(table.io.join(table.root, relative), b"not referenced by any snapshot")
    if table.io.is_local:
        empty = f"{partition_dirs[-1]}/bucket-9"
        os.makedirs(os.path.join(table.root, empty))
        planted.empty_old_dirs.append(empty)
    return planted


def age_local_files(table: Table, planted: Planted) -> None:
    """Everything but the fresh orphans becomes 3 days old: files first, then directories."""
    old = time.time() - DAYS_AGO
    fresh = {os.path.join(table.root, p) for p in planted.fresh}
    for directory, _dirs, files in os.walk(table.root):
        for name in files:
            path = os.path.join(directory, name)
            if path not in fresh:
                os.utime(path, (old, old))
    for directory, _dirs, _files in os.walk(table.root):
        os.utime(directory, (old, old))


def referenced(table: Table) -> set[str]:
    """Every file any snapshot or tag references, from the metadata."""
    references = References(table)
    manager = table.snapshot_manager
    out: set[str] = set()
    for snapshot in [*manager.snapshots(), *manager.tags().values()]:
        out.update(references.of(snapshot))
    latest = manager.latest_snapshot()
    assert latest is not None
    for snapshot in [latest, *manager.tags().values()]:
        assert_matches_core(table, snapshot, references.of(snapshot))
    return out


def run_cleanup(
    table: Table, expected: dict[str, int], referenced_candidates: int, **kwargs: Any
) -> dict[str, Any]:
    """A dry run, then the real run: the same orphans by kind, and the dry run deletes nothing.

    Every file of the table is old enough here, so the referenced files in candidate locations are
    candidates too, and only the used set keeps them.
    """
    before = tree(table)
    dry = remove_orphan_files(table, dry_run=True, **kwargs).to_json()
    assert tree(table) == before, "a dry run changed the table"
    real = remove_orphan_files(table, dry_run=False, **kwargs).to_json()
    for key in ("orphans", "files", "bytes", "candidates"):
        assert dry[key] == real[key], key
    assert real["files"] == expected
    assert real["orphans"] == sum(expected.values())
    assert real["candidates"] == referenced_candidates + real["orphans"]
    assert not real["failed"] and real["alreadyMissing"] == 0 and real["keptByRecheck"] == 0
    return real


@pytest.mark.parametrize("storage", STORAGES)
def test_orphan_cleanup_removes_old_planted_orphans_and_keeps_everything_referenced(
    storage: str, pristine: Pristine, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    placed: dict[str, Placed] = {
        name: place(storage, pristine.paths[name], tmp_path, request) for name in TABLES
    }
    local = storage == "local"
    for name, item in placed.items():
        table = item.table
        original = tree(table)
        used = referenced(table)
        in_candidate_locations = {
            p for p in original if p.split("/")[0] in CANDIDATE_METADATA_DIRS or "bucket-" in p
        }
        assert in_candidate_locations <= used, "pypaimon left unreferenced files where cleanup looks"
        planted = plant(table)
        if local:
            age_local_files(table, planted)

        # Under 1 hour is refused without the override, and nothing is touched.
        before = tree(table)
        with pytest.raises(MaintenanceRefusedError, match="under"):
            remove_orphan_files(table, dry_run=False, older_than=timedelta(minutes=59))
        assert tree(table) == before
        overridden = remove_orphan_files(
            table,
            dry_run=True,
            older_than=timedelta(minutes=59),
            allow_short_older_than=True,
            clock=days_ahead,
        ).to_json()
        assert overridden["files"] == planted.counts(planted.old, planted.fresh), name
        assert tree(table) == before

        if local:
            result = run_cleanup(table, planted.counts(planted.old), len(in_candidate_locations))
            assert result["directoriesRemoved"] == len(planted.empty_old_dirs)
            for directory in planted.empty_old_dirs:
                assert not os.path.exists(os.path.join(table.root, directory))
            survivors = planted.fresh
        else:
            # The real clock: every object is fresh, so nothing is even a candidate.
            untouched = remove_orphan_files(table, dry_run=False).to_json()
            assert untouched["candidates"] == 0 and untouched["orphans"] == 0 and not untouched["files"]
            assert tree(table) == before
            run_cleanup(
                table,
                planted.counts(planted.old, planted.fresh),
                len(in_candidate_locations),
                clock=days_ahead,
            )
            survivors = {}

        after = tree(table)
        assert not set(planted.old) & set(after), name
        if not local:
            assert not set(planted.fresh) & set(after), name
        assert set(survivors) <= set(after), name
        assert set(planted.bystanders) <= set(after), name
        lost = sorted(p for p in original if after.get(p) != original[p])
        assert not lost, f"{name}: cleanup removed or changed table files: {lost}"
        missing = sorted(used - set(after))
        assert not missing, f"{name}: referenced files are gone: {missing}"
        # A second run finds nothing: no planted old orphan is left and no referenced file is one.
        again = remove_orphan_files(table, dry_run=True, clock=time.time if local else days_ahead).to_json()
        assert again["orphans"] == 0, name

    copies = {name: item.frozen_copy("after") for name, item in placed.items()}
    requests = [(copies[name], s) for name in TABLES for s in pristine.rows[name]]
    for (copy, selector), rows in zip(requests, read_rows(requests), strict=True):
        assert rows == pristine.rows[copy.name][selector], (copy.name, selector)
