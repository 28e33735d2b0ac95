"""Runs the Iceberg stateful machine (tests/stateful/iceberg_machine.py); see tests/stateful/README.md, "Iceberg".

CI mode (default): seeded rounds (seed CI_SEED, CI_SEED + 1, ...) of CI_ROUND_EXAMPLES examples of up to CI_STEPS
steps, until CI_MAX_EXAMPLES examples are done or ``LAKEFORMAT_STATEFUL_ICEBERG_BUDGET_S`` (default CI_BUDGET_S)
is spent once CI_MIN_EXAMPLES are done. The budget bounds how far the run explores, never what a step checks.
Soak mode: ``LAKEFORMAT_STATEFUL_ICEBERG_EXAMPLES`` / ``_STEPS`` / ``_ROUNDS`` (seeded by ``--hypothesis-seed=N``,
round r with seed N + r); or ``tests/stateful/run_iceberg_machine.py`` outside pytest, with a wall-clock limit.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import hypothesis.core
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from airflow_lakeformat.core.tables import open_table
from tests.stateful.iceberg_machine import STATS, IcebergTableMachine
from tests.stateful.iceberg_model import (
    IcebergModel,
    Ref,
    Snap,
    canonical_rows,
    decode,
    delete,
    merge,
    overwrite,
    update,
)
from tests.support.java_iceberg import run_oracle

pytestmark = [pytest.mark.interop, pytest.mark.slow]

CI_SEED = 20261128
CI_ROUND_EXAMPLES = 3
CI_STEPS = 15
CI_MIN_EXAMPLES = 3
CI_MAX_EXAMPLES = 9
CI_BUDGET_S = 45.0


def iceberg_settings(examples: int, steps: int, shrink: bool = True) -> settings:
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=phases,
    )


def describe(exc: BaseException) -> str:
    notes = "\n".join(getattr(exc, "__notes__", []) or [])
    return f"{type(exc).__name__}: {str(exc).strip()}\n{notes}".strip()


def run_round(seed: int, examples: int, steps: int, shrink: bool = True) -> None:
    """One hypothesis run of the machine with ``seed`` (what ``--hypothesis-seed`` sets)."""
    previous = hypothesis.core.global_force_seed
    hypothesis.core.global_force_seed = seed
    try:
        run_state_machine_as_test(IcebergTableMachine, settings=iceberg_settings(examples, steps, shrink))
    finally:
        hypothesis.core.global_force_seed = previous


def _ci_rounds(budget_s: float) -> None:
    started = time.monotonic()
    done, seed = 0, CI_SEED
    try:
        while done < CI_MAX_EXAMPLES:
            if done >= CI_MIN_EXAMPLES and time.monotonic() - started >= budget_s:
                break
            try:
                run_round(seed, CI_ROUND_EXAMPLES, CI_STEPS)
            except Exception as exc:
                exc.add_note(f"Iceberg stateful CI round with seed {seed} (replay: --hypothesis-seed={seed})")
                raise
            done += CI_ROUND_EXAMPLES
            seed += 1
    finally:
        print(
            f"\nIceberg stateful CI: {done} examples, {STATS['steps']} steps ({STATS['checked']} Java-checked) in rounds seeded {CI_SEED}..{seed - 1}, "
            f"{time.monotonic() - started:.0f} s of a {budget_s:.0f} s budget; per rule {dict(STATS['rules'])}",
            flush=True,
        )


def test_stateful_iceberg_machine(request: pytest.FixtureRequest) -> None:
    """Java Iceberg writes interleaved with our writes and maintenance, Java reading every ref after every step.

    Known defects are skipped only when LAKEFORMAT_STATEFUL_ICEBERG_SKIP names them (replaying older checkouts)."""
    examples = int(os.environ.get("LAKEFORMAT_STATEFUL_ICEBERG_EXAMPLES", "0"))
    if not examples:
        _ci_rounds(float(os.environ.get("LAKEFORMAT_STATEFUL_ICEBERG_BUDGET_S", CI_BUDGET_S)))
        return
    steps = int(os.environ.get("LAKEFORMAT_STATEFUL_ICEBERG_STEPS", "50"))
    rounds = int(os.environ.get("LAKEFORMAT_STATEFUL_ICEBERG_ROUNDS", "1"))
    given = request.config.getoption("hypothesis_seed", None)
    base = int(given) if given is not None else random.SystemRandom().randrange(2**32)
    failures: list[str] = []
    for number in range(rounds):
        seed = base + number
        print(f"\nIceberg stateful soak round {number + 1}/{rounds}: --hypothesis-seed={seed}", flush=True)
        try:
            run_round(seed, examples, steps)
        except Exception as exc:
            STATS["violations"] += 1
            failures.append(f"seed {seed}: {describe(exc)}")
            print(
                f"VIOLATION (replay: --hypothesis-seed={seed} with the same env)\n{failures[-1]}", flush=True
            )
    print(
        f"\nIceberg stateful soak: {STATS['examples']} examples, {STATS['steps']} steps, "
        f"{STATS['violations']} violation(s); seeds {base}..{base + rounds - 1}",
        flush=True,
    )
    assert not failures, "\n\n".join(failures)


# -- proof that the machine can fail ----------------------------------------------------------------------------


def test_machine_catches_expiry_that_deletes_a_live_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inject a defect (a monkeypatch here, not in airflow_lakeformat/): every real expiry also deletes the live data
    files. Three of the machine's steps, called directly, must report it after the expiry."""
    from airflow_lakeformat.core.iceberg.maintenance import expiry

    original = expiry.execute_snapshot_expiry

    def execute_and_delete_live_files(table: Any, plan: Any, **kwargs: Any) -> Any:
        result = original(table, plan, **kwargs)
        if not kwargs.get("dry_run", True):
            for path in Path(table.root).rglob("*.parquet"):
                path.unlink()
        return result

    monkeypatch.setattr(expiry, "execute_snapshot_expiry", execute_and_delete_live_files)
    machine = IcebergTableMachine()
    try:
        machine.create_the_table(
            catalog="hadoop", partitioned=True, mode="merge-on-read", rows=[{"k": 1, "p": "a", "v": "x"}]
        )
        machine.java_insert(branch="main", rows=[{"k": 2, "p": "b", "v": "y"}])
        with pytest.raises(AssertionError, match="Java cannot read the table after this step"):
            machine.our_expire_snapshots(index=0, everything=True, retain_last=1, dry_run=False)
    finally:
        machine.teardown()


# -- focused tests of the defects the machine found (KNOWN_DEFECTS in iceberg_support.py) ------------------------


def test_compaction_of_a_java_file_and_one_of_ours_in_one_group(tmp_path: Path) -> None:
    """Found by the machine (seed 2 of run_iceberg_machine.py --seed 1): Java inserts a row, we append one to the
    same partition, and ``compact_data(rewrite-all)`` must rewrite both files into one, Java reading both rows.
    It failed (fixed): pyarrow reads Java's file with ``string`` and ours with ``large_string`` columns, and the
    rolling writer (core/iceberg/maintenance/data_compaction_rewrite.py) refused the second batch with an untyped
    ValueError ("Table schema does not match schema used to create file"); it now casts every batch to the first
    one's Arrow types."""
    warehouse = tmp_path / "warehouse"
    run_oracle(
        "sql",
        "--statement",
        "CREATE TABLE hc.db.t (k INT, p STRING, v STRING) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='2')",
        "--statement",
        "INSERT INTO hc.db.t VALUES (1, 'a', 'x')",
        warehouse=warehouse,
    )
    root = str(warehouse / "db" / "t")
    rows = pa.table({"k": pa.array([2], pa.int32()), "p": ["a"], "v": ["y"]})
    open_table(root).writes().write_rows(rows, commit_user="u", commit_identifier=1)
    result = open_table(root).maintenance.compact_data(options={"rewrite-all": "true"})
    assert (result.files_rewritten, result.files_added) == (2, 1), result
    read = run_oracle("sql", "--statement", "SELECT k, p, v FROM hc.db.t ORDER BY k", warehouse=warehouse)
    assert read == [[{"k": 1, "p": "a", "v": "x"}, {"k": 2, "p": "a", "v": "y"}]]


def test_delete_compaction_of_a_java_delete_file_and_one_of_ours(tmp_path: Path) -> None:
    """Found by the soak (seed 8108 of run_iceberg_machine.py --seed 8100): Java deletes two rows (two
    position-delete files), our ``compact_deletes(rewrite-all)`` merges them into one, Java deletes a third row;
    a second ``compact_deletes`` must merge Java's file and ours. It failed: ours is written with pyiceberg's Arrow
    schema (``large_string``), Java's reads as ``string``, and concatenating them raised ``ArrowInvalid: Schema at
    index 1 was different`` (core/iceberg/maintenance/delete_compaction.py); nothing committed, no row lost."""
    warehouse = tmp_path / "warehouse"

    def sql(*statements: str) -> Any:
        return run_oracle("sql", *[x for s in statements for x in ("--statement", s)], warehouse=warehouse)

    sql(
        "CREATE TABLE hc.db.t (k INT, p STRING, v STRING) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
        "INSERT INTO hc.db.t VALUES (1, 'a', 'x'), (2, 'a', 'y'), (3, 'a', 'z'), (4, 'a', 'w')",
        "DELETE FROM hc.db.t WHERE k = 1",
        "DELETE FROM hc.db.t WHERE k = 2",
    )
    root = str(warehouse / "db" / "t")
    first = open_table(root).maintenance.compact_deletes(options={"rewrite-all": "true"})
    assert first.snapshot_id is not None, first
    sql("DELETE FROM hc.db.t WHERE k = 3")
    second = open_table(root).maintenance.compact_deletes(options={"rewrite-all": "true"})
    assert second.snapshot_id is not None, second
    deletes = sql("SELECT record_count FROM hc.db.t.files WHERE content = 1")[0]
    assert deletes == [{"record_count": 3}], deletes  # Java's file and ours merged into one
    assert sql("SELECT k FROM hc.db.t")[0] == [{"k": 4}]


# -- the model's rules on hand-made tables (no Java) ---------------------------------------------------------------


def test_model_expiry_follows_javas_remove_snapshots() -> None:
    """main 1<-2<-3<-4, branch b (keep 2) at 5 on 2, tag on 2, 6 a rolled-back head on 3, 7 an old orphan: with
    older_than 35 and retain_last 1, main keeps 4 only (3 is older and the count is met), b keeps 5 and 2, the tag
    keeps 2, 6 is new enough, 7 is not; 1 and 3 are branch ancestors, so the unreferenced rule does not keep them."""
    model = IcebergModel(partitioned=False)
    for snapshot_id, parent, stamp in [
        (1, None, 10),
        (2, 1, 20),
        (3, 2, 30),
        (4, 3, 40),
        (5, 2, 50),
        (6, 3, 60),
        (7, None, 5),
    ]:
        model.snapshots[snapshot_id] = Snap(parent, stamp, ())
    model.refs = {"main": Ref("BRANCH", 4), "b": Ref("BRANCH", 5, 2), "t": Ref("TAG", 2)}
    assert model.expected_expiry(35, 1) == {1, 3, 7}
    assert model.expected_expiry(30, 1) == {1, 7}  # the boundary: a snapshot at older_than is kept
    assert model.expected_expiry(100, 3) == {
        1,
        6,
        7,
    }  # main keeps 4, 3, 2; b keeps 5, 2 (its own 2 wins over 3)


def test_model_sql_semantics() -> None:
    rows = canonical_rows(
        [{"k": 1, "p": None, "v": "x"}, {"k": 2, "p": "a", "v": None}, {"k": 3, "p": "b", "v": "y"}]
    )
    assert decode(delete(rows, ("p", "a"))) == [{"k": 1, "p": None, "v": "x"}, {"k": 3, "p": "b", "v": "y"}]
    assert len(delete(rows, ("p", None))) == 2  # IS NULL
    assert update(rows, ("v", None), "p", "z") == update(rows, ("k", 2), "p", "z")
    merged = decode(merge(rows, [{"k": 2, "p": "q", "v": "m"}, {"k": 9, "p": None, "v": None}], "update"))
    assert (
        {"k": 2, "p": "a", "v": "m"} in merged
        and {"k": 9, "p": None, "v": None} in merged
        and len(merged) == 4
    )
    assert len(merge(rows, [{"k": 1, "p": None, "v": None}], "delete")) == 2
    new = [{"k": 5, "p": None, "v": None}]
    assert decode(overwrite(rows, new, "dynamic", True)) == sorted(
        [{"k": 2, "p": "a", "v": None}, {"k": 3, "p": "b", "v": "y"}, {"k": 5, "p": None, "v": None}],
        key=lambda r: canonical_rows([r]),
    )
    assert decode(overwrite(rows, new, "dynamic", False)) == new
    assert len(overwrite(rows, [{"k": 5, "p": "a", "v": None}], "static", True, "a")) == 3
