"""Make docs/images/health-report.png: the HTML health report of a real, unhealthy Iceberg table.

The table (Hadoop layout under ``--dir``, partitioned by ``day``; retention 4 s, at least 3 snapshots kept):

1. three appends of 6,000 rows, one day each (one file each, about 106 KiB);
2. the target file size set to 128 KiB (small: under 96 KiB), so that small and full-sized files both come
   from a quick script (the writer rolls files at the target, hence after the large appends);
3. eight appends of 40 rows into five days, one small file per day and append (8, 7, 6, 5 and 2 files);
4. a pause of 5 s, so those snapshots pass the retention;
5. a position delete of 12 rows in each of four files of the second day (merge-on-read deletes, 17% of
   its rows), committed as a delete manifest with the test suite's helper (the provider writes no deletes);
6. two more small appends.

Its health is computed from the metadata (``table.health()``), the report written with
``core/health/report_html.write_report`` and photographed by Debian's headless ``chromium`` (no network:
the page needs none). Run from the repository root::

    .venv/bin/python scripts/health_report_picture.py [--dir /tmp/lakeformat-health-demo] [--png PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airflow_lakeformat.cli import main as lakeformat
from airflow_lakeformat.core.health.report_html import write_report
from airflow_lakeformat.core.tables import open_table

DAYS = [
    "2026-11-20",
    "2026-11-21",
    "2026-11-22",
    "2026-11-23",
    "2026-11-24",
    "2026-11-25",
    "2026-11-26",
    "2026-11-27",
]
SMALL_FILES = [8, 7, 6, 5, 2]
OPTIONS = (
    "history.expire.max-snapshot-age-ms=4000",
    "history.expire.min-snapshots-to-keep=3",
)


def rows(day: str, first: int, count: int) -> pa.Table:
    """``count`` rows of ``day``; the payload is a hash, so Parquet cannot shrink it much."""
    keys = list(range(first, first + count))
    return pa.table(
        {
            "day": [day] * count,
            "id": pa.array(keys, pa.int64()),
            "payload": [hashlib.sha256(f"{day}/{k}".encode()).hexdigest()[:24] for k in keys],
        }
    )


def build(root: Path) -> None:
    schema = root.parent / "schema.json"
    schema.write_text(
        json.dumps(
            [
                {"name": "day", "type": "STRING"},
                {"name": "id", "type": "BIGINT"},
                {"name": "payload", "type": "STRING"},
            ]
        )
    )
    argv = [
        "create-table",
        str(root),
        "--format",
        "iceberg",
        "--schema",
        str(schema),
        "--partition-keys",
        "day",
    ]
    for option in OPTIONS:
        argv += ["--option", option]
    assert lakeformat(argv) == 0
    writes = open_table(str(root)).writes()
    commit = iter(range(1, 1000))
    for day in DAYS[5:]:
        writes.write_rows(rows(day, 0, 6000), commit_user="picture", commit_identifier=next(commit))
    set_target_size(root, 128 << 10)
    for r in range(max(SMALL_FILES)):
        batch = [rows(day, r * 100, 40) for day, n in zip(DAYS, SMALL_FILES, strict=False) if r < n]
        writes.write_rows(pa.concat_tables(batch), commit_user="picture", commit_identifier=next(commit))
    time.sleep(5)
    delete_rows(root, DAYS[1])
    for r in range(2):
        writes.write_rows(
            rows(DAYS[4], 5000 + r * 100, 40), commit_user="picture", commit_identifier=next(commit)
        )


def set_target_size(root: Path, size: int) -> None:
    """The target file size, set after the large appends (the writer rolls its files at the target)."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry

    table = open_path_table(str(root))
    commit_with_retry(table, lambda tx: tx.set_properties({"write.target-file-size-bytes": str(size)}))


def delete_rows(root: Path, day: str) -> None:
    """A position-delete file removing 12 rows of four files of ``day``."""
    from pyiceberg.manifest import DataFileContent

    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
    from tests.iceberg.helpers import commit_delete_files, data_file, write_parquet

    table = open_path_table(str(root))
    head = table.snapshot(ref="main")
    assert head is not None
    targets = sorted(f.path for f in live_files(table, head) if f.partition == (day,) and f.content == 0)[:4]
    positions = pa.table(
        {
            "file_path": [p for p in targets for _ in range(12)],
            "pos": pa.array([i for _ in targets for i in range(12)], pa.int64()),
        }
    )
    path = write_parquet(root.parent / "landing" / "pos.parquet", positions)
    commit_delete_files(
        table, [data_file(table.table, path, (day,), content=DataFileContent.POSITION_DELETES)]
    )


def screenshot(html: Path, png: Path) -> None:
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        subprocess.run(
            [
                "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                f"--screenshot={png}", "--window-size=1200,2050", "--hide-scrollbars", html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/lakeformat-health-demo"))
    parser.add_argument("--png", type=Path, default=Path("docs/images/health-report.png"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    root = args.dir / "warehouse" / "analytics" / "events"
    root.parent.mkdir(parents=True)
    build(root)
    health = open_table(str(root)).health()
    print(health.summary())
    html = write_report(health.to_json(), args.dir / "health-report.html")
    args.png.parent.mkdir(parents=True, exist_ok=True)
    screenshot(html, args.png)
    print(f"report {html}, picture {args.png}")


if __name__ == "__main__":
    run()
