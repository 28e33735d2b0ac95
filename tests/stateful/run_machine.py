"""Run the stateful machine outside pytest, optionally against another checkout of the package.

    .venv/bin/python tests/stateful/run_machine.py --examples 60 --steps 30 [--seed N] [--code DIR]

``--code DIR`` puts ``DIR`` (holding an ``airflow_lakeformat/`` package, e.g. from
``git archive <commit> airflow_lakeformat | tar -x -C DIR``) ahead of this work tree, so the machine
tests that code; the tests themselves always come from this work tree. Without ``--seed`` the run is
derandomized (the CI sequence). Prints the step and violation counts; exit 1 on a violation.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--code", help="a directory holding the airflow_lakeformat package to test")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))

    import hypothesis.core
    from hypothesis.stateful import run_state_machine_as_test

    import airflow_lakeformat
    from tests.stateful.machine import STATS, PaimonTableMachine
    from tests.stateful.test_stateful_tables import machine_settings

    print(f"testing {Path(airflow_lakeformat.__file__).parent}", flush=True)
    if args.seed is not None:
        hypothesis.core.global_force_seed = args.seed
    started = time.monotonic()
    code = 0
    try:
        run_state_machine_as_test(
            PaimonTableMachine, settings=machine_settings(args.examples, args.steps, args.seed is None)
        )
    except Exception as exc:
        STATS["violations"] += 1
        notes = "\n".join(getattr(exc, "__notes__", []) or [])
        print(f"VIOLATION: {type(exc).__name__}: {exc}\n{notes}", flush=True)
        code = 1
    print(
        f"{STATS['examples']} examples, {STATS['steps']} steps, {STATS['violations']} violation(s), "
        f"{time.monotonic() - started:.0f} s; per rule: {dict(sorted(STATS['rules'].items()))}",
        flush=True,
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
