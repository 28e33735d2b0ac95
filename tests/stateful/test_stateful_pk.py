"""Runs the primary-key state machine (tests/stateful/pk_machine.py) in CI; soaks use run_pk_machine.py.

CI mode: one seeded round (seed CI_SEED) of CI_EXAMPLES examples of up to CI_STEPS steps; every step is
checked in full (pypaimon reads, the structural checker, files). ``LAKEFORMAT_STATEFUL_PK_EXAMPLES`` /
``LAKEFORMAT_STATEFUL_PK_STEPS`` / ``--hypothesis-seed`` make it longer and random. The can-fail proof drives
the machine's steps directly with a compaction that loses one row per output file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import hypothesis.core
import pyarrow as pa
import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.stateful.pk_machine import PkTableMachine
from tests.stateful.test_stateful_tables import machine_settings

pytestmark = [pytest.mark.interop, pytest.mark.slow]

CI_SEED = 20261128
CI_EXAMPLES = 3
CI_STEPS = 15


def test_pk_machine(request: pytest.FixtureRequest) -> None:
    examples = int(os.environ.get("LAKEFORMAT_STATEFUL_PK_EXAMPLES", CI_EXAMPLES))
    steps = int(os.environ.get("LAKEFORMAT_STATEFUL_PK_STEPS", CI_STEPS))
    given = request.config.getoption("hypothesis_seed", None)
    previous = hypothesis.core.global_force_seed
    hypothesis.core.global_force_seed = int(given) if given is not None else CI_SEED
    try:
        run_state_machine_as_test(PkTableMachine, settings=machine_settings(examples, steps, False))
    finally:
        hypothesis.core.global_force_seed = previous


class _Rows:
    """A stand-in for hypothesis' ``data`` argument: hands out fixed rows."""

    def __init__(self, rows: list[dict[str, object]]) -> None:
        self.rows = rows

    def draw(self, _strategy: Any, label: str | None = None) -> Any:
        return self.rows


def test_pk_machine_catches_a_compaction_that_loses_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lakeformat.core.paimon.merge_tree import kv_files

    original = kv_files.write_kv

    def lossy(*args: Any, data: Iterable[pa.Table], **kwargs: Any) -> Any:
        def drop_first(chunks: Iterable[pa.Table]) -> Iterator[pa.Table]:
            for chunk in chunks:
                yield chunk.slice(1) if chunk.num_rows > 1 else chunk

        return original(*args, data=drop_first(data), **kwargs)

    monkeypatch.setattr(kv_files, "write_kv", lossy)
    state = PkTableMachine()
    try:
        state.create_the_table(engine="deduplicate", trigger=5, target_file_size="128 mb")
        rows = [{"p": "2024-01-01", "k": k, "v": "a", "n": k, "op": "+I"} for k in range(4)]
        state.pypaimon_upsert(_Rows(rows))  # a stand-in for hypothesis' data
        state.our_upsert(_Rows([{**rows[0], "v": "b", "op": "+U"}]))
        state.table_is_sound()
        state.compact("full")
        with pytest.raises(AssertionError, match="pypaimon reads snapshot 3"):
            state.table_is_sound()
    finally:
        state.teardown()


def test_pypaimon_reads_its_own_lone_level0_retractions_raw() -> None:
    """Why the machine reads lone level-0 splits through pypaimon's merge reader (``merge_lone_level0``):
    pypaimon 2.1 writes ``_DELETE_ROW_COUNT = 0`` into a file of -U/-D rows, so its split generator takes the
    raw path for a bucket holding only that file and returns the retractions as rows (found by the soak,
    seed 42: a first commit of only -D/-U rows read back as three rows). If this starts failing, pypaimon
    counts its deletes and the workaround can go."""
    state = PkTableMachine()
    try:
        state.create_the_table(engine="deduplicate", trigger=5, target_file_size="128 mb")
        rows = [{"p": "2024-01-01", "k": 3, "v": "b", "n": None, "op": "-D"}]
        state.pypaimon_upsert(_Rows(rows))  # a stand-in for hypothesis' data
        [entry] = state._live()
        assert entry.file.delete_row_count == 0, "pypaimon counts no delete"
        raw = state.worker.call("read", path=str(state.root))
        assert [r["op"] for r in raw] == ["-D"], raw
        merged = state.worker.call("verify", path=str(state.root), snapshots=[1], merge_lone_level0=True)
        assert merged["snapshots"]["1"]["rows"] == []
        state.table_is_sound()
    finally:
        state.teardown()
