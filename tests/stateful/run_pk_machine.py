"""Soak the primary-key state machine (``pk_machine.py``) outside pytest, round after round, until a step
count or a wall-clock time.

    .venv/bin/python tests/stateful/run_pk_machine.py --seed 1000 --steps-total 5000 --until 21:50 \\
        --examples-per-round 4 --steps 50 [--shrink]

Round *r* runs ``--examples-per-round`` hypothesis examples of up to ``--steps`` steps with seed
``--seed + r``; no round starts after ``--until`` (UTC, HH:MM) or once ``--steps-total`` steps are done. A
violation is printed with its seed (replay with ``--seed <it> --steps-total 1 --shrink`` and the same
per-round sizes to get it shrunk) and counted; the next round starts. Exit 1 if any round failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _deadline(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    hour, minute = (int(x) for x in text.split(":"))
    now = dt.datetime.now(dt.UTC)
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--steps-total", type=int, default=5000)
    parser.add_argument("--until", help="UTC HH:MM: no round starts after it")
    parser.add_argument("--examples-per-round", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--shrink", action="store_true", help="shrink a failing example (slow)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))

    import hypothesis.core
    from hypothesis import Phase
    from hypothesis.stateful import run_state_machine_as_test

    from tests.stateful.pk_machine import STATS, PkTableMachine
    from tests.stateful.test_stateful_tables import machine_settings

    deadline = _deadline(args.until)
    started = time.monotonic()
    seed = args.seed
    failed: list[int] = []
    while STATS["steps"] < args.steps_total and (deadline is None or dt.datetime.now(dt.UTC) < deadline):
        hypothesis.core.global_force_seed = seed
        settings = machine_settings(args.examples_per_round, args.steps, False)
        if not args.shrink:
            settings = type(settings)(settings, phases=[Phase.generate])
        try:
            run_state_machine_as_test(PkTableMachine, settings=settings)
        except Exception as exc:
            STATS["violations"] += 1
            failed.append(seed)
            notes = "\n".join(getattr(exc, "__notes__", []) or [])
            print(f"VIOLATION seed {seed}: {type(exc).__name__}: {exc}\n{notes}", flush=True)
        elapsed = time.monotonic() - started
        print(
            f"round seed {seed} done: {STATS['examples']} examples, {STATS['steps']} steps, "
            f"{STATS['violations']} violation(s), {elapsed:.0f} s, {STATS['steps'] / elapsed:.2f} steps/s",
            flush=True,
        )
        seed += 1
    print(
        f"TOTAL: seeds {args.seed}..{seed - 1}, {STATS['examples']} examples, {STATS['steps']} steps, "
        f"{STATS['violations']} violation(s) {failed}, {time.monotonic() - started:.0f} s; "
        f"per rule: {dict(sorted(STATS['rules'].items()))}",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
