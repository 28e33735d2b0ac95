"""Prints the stateful machine's step and violation counts at the end of a pytest run."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.stateful.machine import STATS

    if not STATS["examples"]:
        return
    write = terminalreporter.write_line
    terminalreporter.section("lakeformat stateful machine")
    write(f"examples {STATS['examples']}, steps executed {STATS['steps']}, violations {STATS['violations']}")
    write("steps per rule: " + ", ".join(f"{k} {v}" for k, v in sorted(STATS["rules"].items())))
    for failure in STATS["failures"]:
        write(f"violation: {failure}")
