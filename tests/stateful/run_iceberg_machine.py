"""Soak the Iceberg stateful machine outside pytest, until a number of steps or a wall-clock deadline.

    .venv/bin/python tests/stateful/run_iceberg_machine.py --seed N --steps-total 5000 --until 18:45 \
        [--examples-per-round 2] [--steps 50] [--shrink]

Rounds of ``--examples-per-round`` examples of up to ``--steps`` steps, round r seeded N + r, until
``--steps-total`` steps are done or the UTC time ``--until`` has passed (checked between rounds). A violating
round is printed with its seed (unshrunk unless ``--shrink``: shrinking a long soak example takes long; replay the
seed with ``--shrink`` to get the short steps) and counted; the next round starts. One line per round; exit 1 on a
violation.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps-total", type=int, default=5000)
    parser.add_argument("--until", help="HH:MM UTC: start no round after this")
    parser.add_argument("--examples-per-round", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10_000)
    parser.add_argument("--shrink", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))

    from tests.stateful.iceberg_machine import STATS
    from tests.stateful.test_stateful_iceberg import describe, run_round

    deadline = None
    if args.until:
        hour, minute = (int(x) for x in args.until.split(":"))
        deadline = datetime.now(UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    started = time.monotonic()
    for number in range(args.rounds):
        if STATS["steps"] >= args.steps_total or (deadline is not None and datetime.now(UTC) >= deadline):
            break
        seed = args.seed + number
        try:
            run_round(seed, args.examples_per_round, args.steps, shrink=args.shrink)
            outcome = "ok"
        except Exception as exc:
            STATS["violations"] += 1
            outcome = f"VIOLATION (seed {seed})\n{describe(exc)}"
        print(
            f"{datetime.now(UTC):%H:%M:%S} round {number} seed {seed}: {outcome}; total {STATS['examples']} examples, "
            f"{STATS['steps']} steps ({STATS['checked']} Java-checked), {STATS['violations']} violation(s), "
            f"{time.monotonic() - started:.0f} s",
            flush=True,
        )
    print(
        f"done: {STATS['examples']} examples, {STATS['steps']} steps ({STATS['checked']} Java-checked), "
        f"{STATS['violations']} violation(s), known defects skipped {dict(STATS['known_defects'])}, "
        f"{time.monotonic() - started:.0f} s; per rule {dict(sorted(STATS['rules'].items()))}",
        flush=True,
    )
    return 1 if STATS["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
