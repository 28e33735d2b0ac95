"""Runs the model-based stateful machine (tests/stateful/machine.py); see tests/stateful/README.md.

CI mode (default): a fixed sequence of seeded rounds (seed CI_SEED, CI_SEED + 1, ...; CI_ROUND_EXAMPLES
examples of up to CI_STEPS steps each), run until CI_EXAMPLES examples are done or the machine has used
its time budget (``LAKEFORMAT_STATEFUL_BUDGET_S``, default CI_BUDGET_S) and at least CI_MIN_EXAMPLES are
done. The budget bounds how FAR the run explores, never what a step checks: every step of every example
is checked in full, and the rounds' seeds are printed, so any failure replays. Soak mode:
``LAKEFORMAT_STATEFUL_EXAMPLES`` / ``LAKEFORMAT_STATEFUL_STEPS`` / ``LAKEFORMAT_STATEFUL_ROUNDS`` make it
long and random (seeded by ``--hypothesis-seed=N``, one seed per round: N, N+1, ...).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import hypothesis.core
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.stateful import machine
from tests.stateful.machine import STATS, PaimonTableMachine

pytestmark = [pytest.mark.interop, pytest.mark.slow]

CI_EXAMPLES = 50
CI_STEPS = 40
CI_SEED = 20261128
CI_ROUND_EXAMPLES = 5
CI_MIN_EXAMPLES = 10
CI_BUDGET_S = 120.0


def machine_settings(examples: int, steps: int, derandomize: bool) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=derandomize,
        database=None,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


def _ci_rounds(budget_s: float) -> None:
    """CI mode: seeded rounds of CI_ROUND_EXAMPLES examples until CI_EXAMPLES, or the budget is spent
    once CI_MIN_EXAMPLES are done. A failing round fails the test with its seed (shrunk as usual)."""
    started = time.monotonic()
    previous = hypothesis.core.global_force_seed
    done = 0
    seed = CI_SEED
    try:
        while done < CI_EXAMPLES:
            if done >= CI_MIN_EXAMPLES and time.monotonic() - started >= budget_s:
                break
            hypothesis.core.global_force_seed = seed
            try:
                run_state_machine_as_test(
                    PaimonTableMachine, settings=machine_settings(CI_ROUND_EXAMPLES, CI_STEPS, False)
                )
            except Exception as exc:
                exc.add_note(f"stateful CI round with seed {seed} (replay: --hypothesis-seed={seed})")
                raise
            done += CI_ROUND_EXAMPLES
            seed += 1
    finally:
        hypothesis.core.global_force_seed = previous
        print(
            f"\nstateful CI: {done} examples in rounds seeded {CI_SEED}..{seed - 1}, "
            f"{time.monotonic() - started:.0f} s of a {budget_s:.0f} s budget",
            flush=True,
        )


def _describe(exc: BaseException) -> str:
    notes = "\n".join(getattr(exc, "__notes__", []) or [])
    return f"{type(exc).__name__}: {str(exc).strip()}\n{notes}".strip()


def test_stateful_machine(request: pytest.FixtureRequest) -> None:
    """CI: ~{CI_EXAMPLES} examples x {CI_STEPS} steps, derandomized. Soak: see the module docstring."""
    examples = int(os.environ.get("LAKEFORMAT_STATEFUL_EXAMPLES", "0"))
    if not examples:
        _ci_rounds(float(os.environ.get("LAKEFORMAT_STATEFUL_BUDGET_S", CI_BUDGET_S)))
        return
    steps = int(os.environ.get("LAKEFORMAT_STATEFUL_STEPS", "50"))
    rounds = int(os.environ.get("LAKEFORMAT_STATEFUL_ROUNDS", "1"))
    given_seed = request.config.getoption("hypothesis_seed", None)
    base = int(given_seed) if given_seed is not None else random.SystemRandom().randrange(2**32)
    previous = hypothesis.core.global_force_seed
    failures: list[str] = []
    try:
        for round_number in range(rounds):
            seed = base + round_number
            hypothesis.core.global_force_seed = seed  # what --hypothesis-seed sets, one seed per round
            print(f"\nstateful soak round {round_number + 1}/{rounds}: --hypothesis-seed={seed}", flush=True)
            try:
                run_state_machine_as_test(
                    PaimonTableMachine, settings=machine_settings(examples, steps, False)
                )
            except Exception as exc:  # a violation: counted, printed with its seed and shrunk steps
                STATS["violations"] += 1
                text = f"seed {seed}: {_describe(exc)}"
                STATS["failures"].append(text.splitlines()[0])
                failures.append(text)
                print(f"VIOLATION (replay: --hypothesis-seed={seed} with the same env)\n{text}", flush=True)
    finally:
        hypothesis.core.global_force_seed = previous
        print(
            f"\nstateful soak: {STATS['examples']} examples, {STATS['steps']} steps, "
            f"{STATS['violations']} violation(s); seeds {base}..{base + rounds - 1}",
            flush=True,
        )
    assert not failures, "\n\n".join(failures)


# -- proof that the machine can fail ----------------------------------------------------------------


def _small_run(monkeypatch: pytest.MonkeyPatch, skip: set[str], examples: int = 25, steps: int = 15) -> str:
    """Run the machine on a small budget with known (reported) defects skipped; return the report.

    Without shrinking: the proof is that a run fails and its steps name the culprit, which the first
    failing example's steps already do; shrinking it took most of the proofs' 5 minutes each."""
    monkeypatch.setattr(machine, "SKIP", skip)
    unshrunk = settings(
        machine_settings(examples, steps, True), phases=(Phase.explicit, Phase.reuse, Phase.generate)
    )
    with pytest.raises(AssertionError) as caught:
        run_state_machine_as_test(PaimonTableMachine, settings=unshrunk)
    return _describe(caught.value)


def test_machine_catches_expiry_that_deletes_a_live_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inject a defect (not in airflow_lakeformat/: a monkeypatch here): after every real expiry,
    one live data file of the latest snapshot is deleted too. The machine must report it."""
    from airflow_lakeformat.core.errors import CorruptMetadataError
    from airflow_lakeformat.core.paimon.live_files import live_files
    from airflow_lakeformat.core.paimon.maintenance import expiry

    original = expiry.execute_snapshot_expiry

    def execute_and_delete_one_live_file(table: Any, plan: Any, **kwargs: Any) -> Any:
        result = original(table, plan, **kwargs)
        latest = table.snapshot_manager.latest_snapshot()
        if not kwargs.get("dry_run", True) and latest is not None and plan.expired_ids:
            # On the machine's corrupted copies the latest manifests cannot be read: the defect then picks
            # no file (its own read failing would be reported as the expiry raising after deleting).
            try:
                files = sorted(live_files(table, latest), key=lambda f: f.path)
            except CorruptMetadataError:
                files = []
            if files:
                table.io.delete(table.io.join(table.root, files[0].path))
        return result

    monkeypatch.setattr(expiry, "execute_snapshot_expiry", execute_and_delete_one_live_file)
    report = _small_run(monkeypatch, set(machine.KNOWN_DEFECTS))
    assert "gone" in report or "cannot read" in report, report
    assert "expire" in report, report  # the shrunk steps name the expiry


def test_machine_catches_overwrite_matching_partitions_by_directory_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inject the user's original defect class: overwrite matches a partition by its directory name,
    so ``p=__DEFAULT_PARTITION__`` also takes '' and ' ' (they share one directory)."""
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.live_files import live_entries
    from airflow_lakeformat.core.paimon.paths import PartitionCodec

    def by_directory_name(self: Committer, partition_filter: Any, added: Any = ()) -> list[Any]:
        latest = self.table.snapshot_manager.latest_snapshot()
        if latest is None:
            return []
        codec = PartitionCodec(self.table.schema)

        def matches(partition: bytes) -> bool:
            names = codec.spec(partition)
            return all(
                names[k] == v or str(codec.to_json(partition)[k]) == v
                for k, v in (partition_filter or {}).items()
            )

        return [e.to_delete() for e in live_entries(self.table, latest) if matches(e.partition)]

    monkeypatch.setattr(Committer, "overwrite_entries", by_directory_name)
    report = _small_run(monkeypatch, {"rerun-leftovers"}, examples=40)
    assert "overwrite_partition_with_lakeformat" in report, report
