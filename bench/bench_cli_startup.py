"""How long ``lakeformat --version`` and ``--help`` take to start, against the interpreter's own floor.

    .venv/bin/python bench/bench_cli_startup.py [--repeat N]

Each method runs N times (default 10) as a fresh process; the median wall time is reported, with the ratio to
the floor: ``python -c pass`` with the same interpreter (``-S`` not used: the venv's site initialisation is
part of every command's start). ``read`` times a real read command (``snapshots --json`` of a small Paimon
table made here), which imports the format's modules, for context. Issue 25's goal: ``--version`` under 1 s
on the 2-core machine. The benchmark checks its own answers: every command must exit 0 and print what it
should (the version, the usage line, a JSON document with the table's one snapshot).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], repeat: int) -> tuple[float, str]:
    """The median wall time of ``repeat`` fresh runs, and the last run's stdout (checked by the caller)."""
    times, out = [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
        out = done.stdout
    return statistics.median(times), out


def small_table(directory: Path) -> Path:
    """A Paimon table with one snapshot, written through the CLI itself."""
    schema, rows = directory / "schema.json", directory / "rows.csv"
    schema.write_text(json.dumps([{"name": "id", "type": "BIGINT"}, {"name": "s", "type": "STRING"}]))
    rows.write_text("id,s\n1,a\n2,b\n")
    root = directory / "t"
    cli = [sys.executable, "-m", "airflow_lakeformat.cli"]
    for argv in (
        ["create-table", str(root), "--schema", str(schema)],
        ["write", str(root), "--from", str(rows)],
    ):
        subprocess.run([*cli, *argv], check=True, capture_output=True, cwd=REPO)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="fresh runs per method (default 10)")
    args = parser.parse_args()
    python = sys.executable
    lakeformat = [python, "-m", "airflow_lakeformat.cli"]
    with tempfile.TemporaryDirectory() as work:
        root = small_table(Path(work))
        floor, _ = timed([python, "-c", "pass"], args.repeat)
        version, out = timed([*lakeformat, "--version"], args.repeat)
        assert out.startswith("lakeformat "), out
        help_, out = timed([*lakeformat, "--help"], args.repeat)
        assert out.startswith("usage: lakeformat"), out
        read, out = timed([*lakeformat, "snapshots", str(root), "--json"], args.repeat)
        assert len(json.loads(out)["snapshots"]) == 1, out
    print(f"{'method':<10} {'median s':>9} {'x floor':>8}")
    for label, seconds in (("floor", floor), ("--version", version), ("--help", help_), ("read", read)):
        print(f"{label:<10} {seconds:9.3f} {seconds / floor:8.1f}")
    print(f"goal --version < 1 s: {'met' if version < 1.0 else 'NOT met'} ({version:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
