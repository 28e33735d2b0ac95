"""The planning benchmark's ``--table generated``: a table written with the project's own codecs, cached.

``--files`` ADD entries in ``--manifests`` zstd manifests over ``--commits`` snapshots with realistic
``DataFileMeta`` (``tests/support/tables.py``'s ``TableBuilder``), cached under bench/.work/ by its
parameters; :func:`table_stats` counts what it holds (the benchmark checks every method's file set
against it).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.support.paimon_history import GENERATED_FIELDS as FIELDS

DATABASE = "bench"
TABLE = "planning"
GENERATOR_VERSION = 1  # bump when the generated table changes, to invalidate cached tables


def _split(total: int, parts: int, index: int) -> int:
    """Size of part ``index`` when ``total`` is spread as evenly as possible over ``parts``."""
    return total * (index + 1) // parts - total * index // parts


def build_table(
    table_dir: Path, files: int, manifests: int, commits: int, partitions: int, compression: str
) -> None:
    from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry
    from tests.support.tables import TableBuilder

    rng = random.Random(20260101)
    builder = TableBuilder(
        table_dir,
        FIELDS,
        partition_keys=["dt"],
        options={"bucket": "-1", "file.format": "parquet", "manifest.compression": compression},
        compression=compression,
    )
    day0 = datetime(2025, 1, 1)
    partition_rows = [
        builder.partition((day0 + timedelta(days=i)).strftime("%Y-%m-%d")) for i in range(partitions)
    ]
    # Each commit lands in a window of recent partitions (today plus late-arriving days).
    span = max(3, -(-partitions // commits))
    epoch_ms = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
    sequence = 0
    for c in range(commits):
        count = _split(files, commits, c)
        commit_ms = epoch_ms + c * 60_000
        start = c * partitions // commits
        entries = []
        for j in range(count):
            rows = rng.randint(10_000, 2_000_000)
            meta_fields: dict[str, Any] = {
                "min_sequence_number": sequence,
                "max_sequence_number": sequence + rows - 1,
                "schema_id": 0,
                "creation_time": datetime.fromtimestamp((commit_ms - 5_000 + j) / 1000, tz=timezone.utc),
                "delete_row_count": 0,
                "file_source": FileSource.APPEND,
                "value_stats_cols": [],
            }
            sequence += rows
            name = f"data-{uuid.UUID(int=rng.getrandbits(128), version=4)}-{j}.parquet"
            meta = DataFileMeta.create(name, rows * rng.randint(20, 60), rows, **meta_fields)
            entries.append(
                ManifestEntry.create(
                    FileKind.ADD, partition_rows[(start + j % span) % partitions], 0, -1, meta
                )
            )
        builder.commit(entries, manifests=_split(manifests, commits, c), time_millis=commit_ms)


def table_stats(table_dir: Path) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(table_dir))
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    base, delta = table.data_manifests(snapshot)
    manifest_bytes = sum(m.file_size for m in base + delta)
    return {
        "snapshot_id": snapshot.id,
        "snapshots": len(table.snapshot_manager.list_snapshot_ids()),
        "base_manifests": len(base),
        "delta_manifests": len(delta),
        "manifests": len(base) + len(delta),
        "manifest_bytes": manifest_bytes,
        "manifest_list_bytes": (snapshot.base_manifest_list_size or 0)
        + (snapshot.delta_manifest_list_size or 0),
        "added_entries": sum(m.num_added_files for m in base + delta),
        "deleted_entries": sum(m.num_deleted_files for m in base + delta),
        "data_files_on_disk": 0,
    }


def ensure_table(args: argparse.Namespace) -> tuple[Path, Path, dict[str, Any]]:
    """The cached table for these parameters, built if missing; returns (warehouse, table_dir, stats)."""
    key = (
        f"planning-v{GENERATOR_VERSION}-f{args.files}-m{args.manifests}-c{args.commits}"
        f"-p{args.partitions}-{args.compression}"
    )
    root = Path(args.work_dir).resolve() / key
    warehouse = root / "warehouse"
    table_dir = warehouse / f"{DATABASE}.db" / TABLE
    marker = root / "params.json"
    if marker.exists() and not args.rebuild:
        info = json.loads(marker.read_text())
        print(f"using cached table {table_dir}", file=sys.stderr)
        return warehouse, table_dir, info["stats"]
    if root.exists():
        shutil.rmtree(root)
    print(f"building table {table_dir} ...", file=sys.stderr)
    t0 = time.perf_counter()
    build_table(table_dir, args.files, args.manifests, args.commits, args.partitions, args.compression)
    stats = table_stats(table_dir)
    stats["build_seconds"] = round(time.perf_counter() - t0, 2)
    print(f"built in {stats['build_seconds']} s: {stats}", file=sys.stderr)
    params = {k: getattr(args, k) for k in ("files", "manifests", "commits", "partitions", "compression")}
    marker.write_text(json.dumps({"params": params, "stats": stats}, indent=2))
    return warehouse, table_dir, stats
