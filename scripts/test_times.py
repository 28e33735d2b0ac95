"""Where the suite's time goes: sums the JUnit XML that scripts/test.sh writes (test-results/stream-*.xml).

    .venv/bin/python scripts/test_times.py [--top N] [test-results/stream-a.xml ...]

Prints, per stream, the total of its tests' times, then the N slowest test files and the N slowest tests
(setup, call and teardown together, as JUnit records them). Module- and session-scoped fixtures are
charged to the first test that uses them.
"""

from __future__ import annotations

import argparse
import glob
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path


def test_times(path: Path) -> dict[str, float]:
    """``file::name`` -> seconds, for every test case of one JUnit XML file."""
    times: dict[str, float] = {}
    for case in ElementTree.parse(path).iter("testcase"):
        module = case.get("classname", "").split(".")
        file = "/".join(part for part in module if part and part[0].islower()) + ".py"
        times[f"{file}::{case.get('name')}"] = float(case.get("time", "0"))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="JUnit XML files (default: test-results/stream-*.xml)")
    parser.add_argument("--top", type=int, default=20, help="how many files and tests to list (default 20)")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in (args.files or sorted(glob.glob("test-results/stream-*.xml")))]
    if not paths:
        print("test_times.py: no JUnit XML given and none in test-results/", file=sys.stderr)
        return 1
    every: dict[str, float] = {}
    for path in paths:
        times = test_times(path)
        every.update(times)
        print(f"{path}: {len(times)} tests, {sum(times.values()) / 60:.1f} min")
    per_file: dict[str, float] = defaultdict(float)
    for test, seconds in every.items():
        per_file[test.split("::", 1)[0]] += seconds
    print(f"\nslowest {args.top} files:")
    for file, seconds in sorted(per_file.items(), key=lambda item: -item[1])[: args.top]:
        print(f"{seconds:8.1f} s  {file}")
    print(f"\nslowest {args.top} tests:")
    for test, seconds in sorted(every.items(), key=lambda item: -item[1])[: args.top]:
        print(f"{seconds:8.1f} s  {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
