"""The pypaimon-written benchmark table, built once and cached (main-venv side; pypaimon runs in its venv).

``bench/pypaimon_build.py`` writes it in the pypaimon interpreter: ``commits`` commits, each one data
file in each of ``partitions`` partitions and one manifest, never merged, so snapshot ``k`` lists
``k - 1`` base manifests. Afterwards every file is aged 30 days (orphan cleanup must see referenced
files as old enough to be candidates; planning does not care). Shared by ``bench_planning.py`` and
``bench_orphans_snapshots.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.support.paimon_history import tree_digest
from bench.support.runs import BENCH_DIR, PYPAIMON_ENV_VAR, REPO_ROOT, clean_env, pypaimon_python

BUILD_SCRIPT = BENCH_DIR / "pypaimon_build.py"
DATABASE = "bench"
TABLE = "planning"
VERSION = 1  # bump when the build changes, to invalidate cached tables
DAY = 86_400


def _age_tree(root: Path, when: float) -> int:
    count = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (when, when))
            count += 1
    return count


def _facts(table_dir: Path) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.maintenance.references import snapshot_references
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(table_dir))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    base, delta = table.data_manifests(latest)
    metas = base + delta
    lists: set[str] = set()
    list_rows = 0
    for snapshot in table.snapshot_manager.snapshots():
        refs = snapshot_references(table, snapshot)
        lists |= set(refs.manifest_lists)
        list_rows += len(refs.manifests)
    count, digest = tree_digest(str(table_dir))
    return {
        "snapshots": len(table.snapshot_manager.list_snapshot_ids()),
        "distinct_manifests": len(metas),
        "manifest_entries": sum(m.num_added_files + m.num_deleted_files for m in metas),
        "live_files": sum(m.num_added_files - m.num_deleted_files for m in metas),
        "manifest_bytes": sum(m.file_size for m in metas),
        "distinct_manifest_lists": len(lists),
        "manifest_list_rows_over_all_snapshots": list_rows,
        "files_in_tree": count,
        "tree_digest": digest,
    }


def ensure_pypaimon_table(
    work_dir: Path, commits: int, partitions: int, rows: int, rebuild: bool, python: str | None = None
) -> tuple[Path, Path, Path, dict[str, Any]]:
    """(root, warehouse, table_dir, facts) of the cached table, built with pypaimon if missing."""
    root = work_dir.resolve() / f"pypaimon-v{VERSION}-c{commits}-p{partitions}-r{rows}"
    warehouse = root / "warehouse"
    table_dir = warehouse / f"{DATABASE}.db" / TABLE
    marker = root / "params.json"
    if marker.exists() and not rebuild:
        print(f"using cached pypaimon table {table_dir}", file=sys.stderr)
        return root, warehouse, table_dir, json.loads(marker.read_text())["facts"]
    interpreter = pypaimon_python(python)
    if interpreter is None:
        raise SystemExit(f"no pypaimon interpreter (set ${PYPAIMON_ENV_VAR} or run scripts/setup.sh)")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    print(f"building {table_dir} with pypaimon ({commits} commits) ...", file=sys.stderr)
    started = time.perf_counter()
    completed = subprocess.run(
        [str(interpreter), str(BUILD_SCRIPT), str(warehouse), DATABASE, TABLE, "--commits", str(commits),
         "--partitions", str(partitions), "--rows-per-partition", str(rows)],
        capture_output=True, text=True, env=clean_env(), cwd=REPO_ROOT, check=False,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"pypaimon build failed:\n{completed.stderr[-3000:]}")
    build = json.loads(completed.stdout.strip().splitlines()[-1])
    _age_tree(table_dir, time.time() - 30 * DAY)
    facts = _facts(table_dir)
    facts["build"] = build
    facts["build_seconds"] = round(time.perf_counter() - started, 1)
    marker.write_text(
        json.dumps({"commits": commits, "partitions": partitions, "rows": rows, "facts": facts})
    )
    print(f"built in {facts['build_seconds']} s: {facts}", file=sys.stderr)
    return root, warehouse, table_dir, facts
