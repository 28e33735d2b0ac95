"""Orphan cleanup on a table with many snapshots: a pypaimon table of 2,000 commits plus old orphans.

    .venv/bin/python bench/bench_orphans_snapshots.py [--commits 2000] [--orphans 20000]

The table (``bench/support/pypaimon_table.py``, shared with ``bench_planning.py``) is what a table nobody
maintains looks like: pypaimon 2.1 never merges manifests, so 2,000 commits of 50 files leave
100,000 live files in 2,000 manifests, and snapshot ``k``'s base manifest list holds ``k - 1`` of
them: about 2 million manifest-list rows over all snapshots for 2,000 distinct manifests. Each run
plants ``--orphans`` old orphans (and ``--fresh`` fresh ones) like ``bench_orphans.py`` does and
measures, each in a fresh process and in one run, the same methods and checks as that script:
raw ``os.scandir`` walks, the raw names-only fastavro used set (every snapshot's manifest lists,
then every distinct manifest), the plan (with ``--baseline-root``: also an earlier package's plan),
the dry run and the real run. Exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for entry in (str(REPO_ROOT), str(BENCH_DIR)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

# This benchmark is bench_orphans.py on another table: it reuses that benchmark's run (a one-way import).
from bench_orphans import add_common_arguments, run_benchmark, run_worker  # noqa: E402

from bench.support.orphan_table import plan_planting  # noqa: E402
from bench.support.pypaimon_table import ensure_pypaimon_table  # noqa: E402
from bench.support.runs import DEFAULT_WORK_DIR, RESULTS_DIR  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--commits", type=int, default=2000, help="pypaimon commits (= snapshots = manifests)"
    )
    parser.add_argument(
        "--partitions", type=int, default=50, help="partitions, one data file each per commit"
    )
    parser.add_argument("--rows", type=int, default=2, help="rows per partition per commit")
    parser.add_argument("--orphans", type=int, default=20_000, help="old orphans planted each run")
    parser.add_argument("--fresh", type=int, default=20, help="fresh orphans planted each run (must stay)")
    parser.add_argument("--pypaimon-python", default=None, help="pypaimon interpreter (for the build)")
    parser.add_argument(
        "--output", default=None, help="JSON result (default bench/results/orphans_snapshots*.json)"
    )
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args)
    default = (args.commits, args.partitions, args.rows, args.orphans) == (2000, 50, 2, 20_000)
    output = (
        Path(args.output)
        if args.output
        else RESULTS_DIR
        / ("orphans_snapshots.json" if default else f"orphans_snapshots-c{args.commits}.json")
    )
    started = time.perf_counter()
    load_start = os.getloadavg()
    root, _, table_dir, facts = ensure_pypaimon_table(
        Path(args.work_dir or DEFAULT_WORK_DIR), args.commits, args.partitions, args.rows, args.rebuild,
        args.pypaimon_python,
    )  # fmt: skip
    params = {
        "commits": args.commits,
        "partitions": args.partitions,
        "rows": args.rows,
        "orphans": args.orphans,
        "fresh": args.fresh,
        "repeat": args.repeat,
    }
    return run_benchmark(
        args,
        root,
        table_dir,
        facts,
        output,
        params,
        lambda pristine: plan_planting(
            table_dir, 0, pristine, seed=int(time.time()), old=args.orphans, fresh=args.fresh
        ),
        started,
        load_start,
        script=Path(__file__),
    )


if __name__ == "__main__":
    sys.exit(main())
