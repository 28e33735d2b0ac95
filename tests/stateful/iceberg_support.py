"""Support of the Iceberg stateful machine (``iceberg_machine.py``): counters, known defects, crash injection,
storage helpers, the step expectation and the strategies.

Crash injection (:func:`crash_at`) kills the "process" at the k-th storage mutation, before or after it takes
effect: any mutator of our FileIO, pyiceberg's ``PyArrowFile.create`` (data files, manifests, a SQL catalog's
metadata) and ``PyArrowFileIO.delete``; once dead, every later mutation dies too, so no clean-up code runs (the
idea of ``crash_at`` in ``machine.py``, extended to pyiceberg's writes).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from airflow_lakeformat.core.io import FileIO
from tests.stateful.iceberg_model import IcebergModel, Ref, Rows, Snap

# Defects this machine found, with the error texts they raise. LAKEFORMAT_STATEFUL_ICEBERG_SKIP=<name,...> accepts
# them (the run then requires that the failed operation committed nothing), to explore past a defect while it is
# open or to replay an older checkout; nothing is skipped by default. Each has a focused test in
# test_stateful_iceberg.py.
KNOWN_DEFECTS = {
    # compact_data of a group holding a Java-written file and one of ours: pyarrow reads one with `string`, the
    # other with `large_string` columns and the rolling writer refuses the second ("Table schema does not match
    # schema used to create file", or ArrowInvalid "Schema at index 1 was different: ... large_string ...
    # string"); untyped, nothing committed. Fixed in f111c89 (every batch is cast to the first one's types).
    "compaction-mixed-string-types": (
        ("Table schema does not match schema used to create file",),
        ("Schema at index", "large_string"),
    ),
}
SKIP = {s.strip() for s in os.environ.get("LAKEFORMAT_STATEFUL_ICEBERG_SKIP", "").split(",") if s.strip()}
if SKIP - set(KNOWN_DEFECTS):
    raise ValueError(f"LAKEFORMAT_STATEFUL_ICEBERG_SKIP: unknown {sorted(SKIP - set(KNOWN_DEFECTS))}")
OLD_SECONDS = 10 * 86400
NAMES = ("t1", "t2", "b1", "b2")
STATS: dict[str, Any] = {
    "examples": 0,
    "steps": 0,
    "rules": Counter(),
    "violations": 0,
    "failures": [],
    "known_defects": Counter(),
    "checked": 0,  # steps after which Java read the table (a rule that finds nothing to do reads nothing)
}
_lock = threading.Lock()


def skipped_defect(exc: BaseException) -> str | None:
    """The name of the skipped known defect ``exc`` is, or None."""
    for name in SKIP:
        if any(all(part in str(exc) for part in parts) for parts in KNOWN_DEFECTS[name]):
            with _lock:
                STATS["known_defects"][name] += 1
            return name
    return None


def count_example() -> None:
    with _lock:
        STATS["examples"] += 1


def _count(name: str) -> None:
    with _lock:
        STATS["steps"] += 1
        STATS["rules"][name] += 1


# -- crash injection -------------------------------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """The process dies here: not an Exception, so no retry loop or ``except Exception`` swallows it."""


OUR_MUTATORS = (
    "write_bytes",
    "write_atomic",
    "create_exclusive",
    "write_unsafe",
    "delete",
    "delete_existing",
    "delete_objects",
    "remove_empty_dir",
)


@contextlib.contextmanager
def crash_at(k: int, after: bool) -> Iterator[dict[str, Any]]:
    """Kill the "process" at the k-th storage mutation (before or after it takes effect): any mutator of our
    FileIO, pyiceberg's ``PyArrowFile.create`` (data files, manifests, a SQL catalog's metadata) and
    ``PyArrowFileIO.delete``. A create crashed "after" leaves an empty file. Every later mutation dies too."""
    from pyiceberg.io import pyarrow as pyarrow_io

    state: dict[str, Any] = {"count": 0, "dead": False, "calls": []}
    lock = threading.Lock()
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, finish: Callable[[Any], Any] | None = None) -> None:
        original = getattr(owner, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                state["count"] += 1
                number, dead = state["count"], state["dead"]
                state["calls"].append((name, str(args[0]) if args else getattr(self, "location", "")))
                if number == k:
                    state["dead"] = True
            if dead:
                raise SimulatedCrash(f"{name} after the crash")
            if number == k:
                if after:
                    result = original(self, *args, **kwargs)
                    if finish is not None:
                        finish(result)
                raise SimulatedCrash(f"crash at {name} #{k}")
            return original(self, *args, **kwargs)

        patched.append((owner, name, original))
        setattr(owner, name, wrapper)

    for name in OUR_MUTATORS:
        if hasattr(FileIO, name):
            wrap(FileIO, name)
    wrap(pyarrow_io.PyArrowFile, "create", finish=lambda stream: stream.close())
    wrap(pyarrow_io.PyArrowFileIO, "delete")
    try:
        yield state
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


# -- storage helpers -------------------------------------------------------------------------------------------


def listing(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for directory, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(directory, name)
            info = os.stat(full)
            out[os.path.relpath(full, root)] = (info.st_size, info.st_mtime_ns)
    return out


def local_path(uri: str) -> str:
    """``file:/x``, ``file:///x`` or ``/x`` -> ``/x``."""
    if uri.startswith("file:"):
        uri = "/" + uri[len("file:") :].lstrip("/")
    return os.path.normpath(uri)


def hidden(rel: str) -> bool:
    return any(part.startswith((".", "_")) for part in rel.split(os.sep))


@dataclass
class Expect:
    """What a step may do to the refs and snapshots (see ``IcebergTableMachine._reconcile``)."""

    moves: dict[str, Rows] = field(default_factory=dict)  # ref -> rows of its new head
    may_stay: bool = False  # a moved ref may also stay where it was
    stay_means_no_change: bool = False  # ... but only when the model expected no change of its rows
    same_rows_chain: bool = False  # every new snapshot holds the old head's rows (maintenance)
    operations: frozenset[str] | None = None  # the operations new snapshots may have
    created: dict[str, Ref] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    set_to: dict[str, int] = field(default_factory=dict)  # ref -> an existing snapshot (rollback)
    gone: tuple[frozenset[int], ...] = (frozenset(),)  # the allowed sets of removed snapshots
    full: bool = False
    extra: list[str] = field(default_factory=list)  # more statements whose results the step returns


# -- strategies ------------------------------------------------------------------------------------------------

row_strategy = st.fixed_dictionaries(
    {
        "k": st.integers(0, 7),
        "p": st.sampled_from([None, "a", "b", "é"]),
        "v": st.sampled_from([None, "x", "y", "日本"]),
    }
)
rows_strategy = st.lists(row_strategy, min_size=1, max_size=4)
predicates = st.one_of(
    st.tuples(st.just("k"), st.integers(0, 7)), st.tuples(st.just("p"), st.sampled_from([None, "a", "b"]))
)
targets = st.sampled_from(["main", "b1", "b2"])
indexes = st.integers(0, 10_000)


def check_orphan_cleanup(
    root: Path,
    planted: dict[str, str],
    before: dict[str, tuple[int, int]],
    after: dict[str, tuple[int, int]],
    valid: set[str],
    cutoff_ns: float,
    dry_run: bool,
) -> None:
    """An orphan cleanup of ``root`` (``before``/``after``: listings) against ``valid``, the local paths Java's
    metadata tables reach: a dry run deletes nothing; a real run deletes nothing valid, every planted old orphan
    (forgotten from ``planted``) and every other old, non-hidden file that is not valid, and no fresh file."""
    if dry_run:
        assert before == after, "orphan cleanup dry run changed files"
        return
    missing = sorted(p for p in valid if not os.path.exists(p))
    assert not missing, f"orphan cleanup deleted files Java's metadata reaches: {missing}"
    for rel, age in list(planted.items()):
        if age == "old":
            assert rel not in after, f"planted old orphan {rel} survived"
            del planted[rel]
        else:
            assert rel in after, f"planted fresh orphan {rel} was deleted"
    left = [
        rel
        for rel, (_size, mtime) in before.items()
        if rel in after
        and mtime < cutoff_ns
        and not hidden(rel)
        and os.path.basename(rel) != "version-hint.text"
        and str(root / rel) not in valid
    ]
    assert not left, f"old files no metadata reaches survived orphan cleanup: {left}"


# -- comparing Java's refs and snapshots with the model ----------------------------------------------------------


def reconcile(m: IcebergModel, expect: Expect, java_refs: dict[str, Ref], java_snaps: dict[int, Any]) -> None:
    """Check the refs and snapshots Java sees against ``expect``; teach the model ``m`` the new snapshots."""
    gone = frozenset(set(m.snapshots) - set(java_snaps))
    assert gone in expect.gone, f"snapshots removed: {sorted(gone)}; expected one of {list(expect.gone)}"
    m.expire(gone)
    wanted_names = (set(m.refs) - expect.dropped) | set(expect.created)
    assert set(java_refs) == wanted_names, f"refs: Java {sorted(java_refs)}, model {sorted(wanted_names)}"
    new_ids = set(java_snaps) - set(m.snapshots)
    assigned: set[int] = set()
    for name, ref in sorted(java_refs.items()):
        old = m.refs.get(name)
        if name in expect.moves:
            before = None if old is None else old.snapshot_id
            if ref.snapshot_id == before:
                assert expect.may_stay, f"{name} did not move from {before}"
                assert old is not None
                rows = m.snapshots[before].rows
                assert rows == expect.moves[name] or not expect.stay_means_no_change, (
                    f"{name}: no new snapshot, but the model expected a change of its rows"
                )
                m.refs[name] = Ref(ref.kind, ref.snapshot_id, ref.min_snapshots_to_keep)
                continue
            chain = new_chain(ref.snapshot_id, before, java_snaps, new_ids)
            old_rows = m.snapshots[before].rows if before is not None else None
            for position, snapshot_id in enumerate(chain):
                snap = java_snaps[snapshot_id]
                if expect.operations is not None:
                    assert snap["operation"] in expect.operations, f"{name}: new snapshot {snap}"
                rows = expect.moves[name] if position == 0 or expect.same_rows_chain else None
                m.snapshots[snapshot_id] = Snap(snap["parent_id"], snap["ts"], rows, snap["operation"])
                assigned.add(snapshot_id)
            if expect.same_rows_chain:
                assert expect.moves[name] == old_rows
        elif name in expect.set_to:
            assert ref.snapshot_id == expect.set_to[name], f"{name}: {ref.snapshot_id} != {expect.set_to}"
        elif name in expect.created:
            want = expect.created[name]
            assert (ref.kind, ref.snapshot_id) == (want.kind, want.snapshot_id), f"{name}: {ref} != {want}"
        else:
            assert old is not None and (ref.kind, ref.snapshot_id) == (old.kind, old.snapshot_id), (
                f"ref {name} changed: {old} -> {ref}"
            )
        m.refs[name] = Ref(ref.kind, ref.snapshot_id, ref.min_snapshots_to_keep)
    for name in expect.dropped:
        m.refs.pop(name, None)
    stray = new_ids - assigned
    assert not stray, f"snapshots no ref reached: {[java_snaps[i] for i in sorted(stray)]}"


def new_chain(head: int, before: int | None, java_snaps: dict[int, Any], new_ids: set[int]) -> list[int]:
    """The new snapshots from ``head`` back to ``before`` (exclusive); each must be new, the last must
    have ``before`` as its parent."""
    chain: list[int] = []
    current: int | None = head
    while current != before:
        assert current in new_ids and current not in chain, (
            f"new head {head} does not descend from {before} through new snapshots (at {current})"
        )
        chain.append(current)
        current = java_snaps[current]["parent_id"]
    return chain
