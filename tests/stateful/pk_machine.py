"""A model-based stateful test of Paimon primary-key tables (issue 27): writes of pypaimon and ours, merge-tree
compaction (full and minor), tags, snapshot and partition expiry and orphan cleanup, interleaved at random.

One table per example, in a temporary warehouse: created by pypaimon 2.1 (the persistent worker of
``worker_client.py``), 2 fixed buckets, partitioned by a STRING date ``p`` (two values), primary key
``(p, k)`` with ``k`` in 0..5 so keys collide often, ``rowkind.field=op`` (both writers take each record's kind
from it), merge engine deduplicate or aggregation (``n`` summed, the rest ``last_non_null_value``),
``num-sorted-run.compaction-trigger`` 3 or 5 and a 128 MiB or 2 kB ``target-file-size`` (rolling output).

Rules: ``pypaimon_upsert`` (pypaimon's level-0 files and sequence numbers), ``our_upsert``
(``writes().write_rows``), ``both_upsert`` (one of each, either order), ``compact`` (``maintenance.compact_data(mode="full"|"minor")``), ``create_tag`` /
``delete_tag`` (ours or pypaimon's), ``expire_snapshots`` (real clock, ``older_than`` 0, retain-min 1..3; the
removed ids must be Paimon's rule's), ``remove_orphans`` (every file aged 10 days first, so every file is a
candidate; a planted old orphan must go), ``expire_partitions`` (values-time with an injected now; the model
drops exactly the partitions older than the threshold).

Invariants after every step (:meth:`PkTableMachine.table_is_sound`): snapshot ids and tags on disk are the
model's; pypaimon reads exactly the model's rows at the latest snapshot and at one more retained snapshot or
tag (round-robin; a split of one level-0 file is read through pypaimon's merge reader, because pypaimon 2.1
writes ``_DELETE_ROW_COUNT = 0`` into its files holding -U/-D rows and would read such a lone file raw,
retractions included: ``pypaimon_worker.op_read_merging_level0``); the O2 structural checker (``tests/support/paimon_pk.check_pk_table``) finds nothing at the
latest snapshot (levels >= 1 non-overlapping, LSM order, unique keys per file, exact sequence ranges and
stats, COMPACT on every file our compaction wrote); every file a retained snapshot or tag references exists,
and no data file is left unreferenced (except a deleted tag's). Per step: a write's new files start above
the bucket's live maximum sequence number; after a full compaction every live file is at the max level; a
minor compaction never adds runs, leaves a bucket below the trigger untouched, and reduces one above it.

Statistics for the soak report are in :data:`STATS`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance import expiry, orphans
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.tables import open_table
from tests.stateful.model import expected_expired_ids
from tests.stateful.pk_model import COLUMNS, PkModel, canonical
from tests.stateful.worker_client import shared_worker
from tests.support.paimon_pk import buckets, check_pk_table, max_level

PARTITIONS = ("2024-01-01", "2024-01-02")
KEYS = 6
TAGS = ("t1", "t2", "t3")
OLD_SECONDS = 10 * 86400
EXPIRE_LIMIT = 50  # snapshot.expire.limit's default
FIELDS = [["p", "STRING"], ["k", "BIGINT"], ["v", "STRING"], ["n", "BIGINT"], ["op", "STRING"]]
ARROW = pa.schema(
    [("p", pa.string()), ("k", pa.int64()), ("v", pa.string()), ("n", pa.int64()), ("op", pa.string())]
)

STATS: dict[str, Any] = {"examples": 0, "steps": 0, "rules": Counter(), "violations": 0, "failures": []}
_lock = threading.Lock()


def _count(name: str) -> None:
    with _lock:
        STATS["steps"] += 1
        STATS["rules"][name] += 1


def _record(engine_kinds: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "p": st.sampled_from(PARTITIONS),
            "k": st.integers(0, KEYS - 1),
            "v": st.sampled_from([None, "a", "b", "ccc", "é"]),
            "n": st.one_of(st.none(), st.integers(-3, 9)),
            "op": st.sampled_from(engine_kinds),
        }
    )


records = st.data()


def data_files_on_disk(root: Path) -> dict[str, str]:
    """Data file name -> relative path (everything under partition directories)."""
    out = {}
    for directory, _dirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        if rel.split(os.sep)[0].startswith("p="):
            for name in files:
                out[name] = os.path.join(rel, name)
    return out


def snapshot_ids_on_disk(root: Path) -> list[int]:
    directory = root / "snapshot"
    if not directory.is_dir():
        return []
    return sorted(int(n[len("snapshot-") :]) for n in os.listdir(directory) if n.startswith("snapshot-"))


class PkTableMachine(RuleBasedStateMachine):
    """Drives one primary-key table; checks it against :class:`PkModel`, pypaimon and the checker."""

    def __init__(self) -> None:
        super().__init__()
        self.worker = shared_worker()
        self.tmp = Path(tempfile.mkdtemp(prefix="lakeformat-pk-stateful-"))
        self.root = self.tmp / "warehouse" / "db.db" / "t"
        self.model: PkModel | None = None
        self.may_exist: set[str] = set()
        self.compact_files: set[str] = set()
        self.commit_identifier = 0
        self.rotation = 0
        with _lock:
            STATS["examples"] += 1

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(
        engine=st.sampled_from(["deduplicate", "deduplicate", "aggregation"]),
        trigger=st.sampled_from([3, 5]),
        target_file_size=st.sampled_from(["128 mb", "2 kb"]),
    )
    def create_the_table(self, engine: str, trigger: int, target_file_size: str) -> None:
        _count("create_the_table")
        options = {
            "bucket": "2",
            "rowkind.field": "op",
            "num-sorted-run.compaction-trigger": str(trigger),
            "target-file-size": target_file_size,
        }
        if engine == "aggregation":
            options.update({"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"})
        self.worker.call(
            "create",
            path=str(self.root),
            fields=FIELDS,
            partition_keys=["p"],
            primary_keys=["p", "k"],
            options=options,
        )
        self.trigger = trigger
        self.model = PkModel(engine)

    # -- helpers -------------------------------------------------------------------------------

    @property
    def m(self) -> PkModel:
        assert self.model is not None
        return self.model

    def table(self) -> Table:
        return Table.open(str(self.root))

    def _kinds(self) -> list[str]:
        return ["+I", "+I", "+U", "-U", "-D"] if self.m.engine == "deduplicate" else ["+I", "+U"]

    def _draw_rows(self, data: st.DataObject) -> list[dict[str, Any]]:
        return data.draw(st.lists(_record(self._kinds()), min_size=1, max_size=8), label="rows")

    def _live(self, snapshot: Snapshot | None = None) -> list[ManifestEntry]:
        table = self.table()
        snapshot = snapshot or table.snapshot_manager.latest_snapshot()
        return [] if snapshot is None else live_entries(table, snapshot)

    def _new_snapshot(self, before: list[int], what: str) -> int:
        after = snapshot_ids_on_disk(self.root)
        expected = [*before, (before[-1] if before else 0) + 1]
        assert after == expected, f"{what}: snapshots {before} -> {after}, expected one new snapshot"
        return after[-1]

    def _write(self, rows: list[dict[str, Any]], writer: str) -> None:
        before_entries = self._live()
        top: dict[tuple[bytes, int], int] = defaultdict(lambda: -1)
        for entry in before_entries:
            where = (entry.partition, entry.bucket)
            top[where] = max(top[where], entry.file.max_sequence_number)
        old_names = {e.file.file_name for e in before_entries}
        before = snapshot_ids_on_disk(self.root)
        if writer == "pypaimon":
            self.worker.call("write", path=str(self.root), rows=rows, overwrite=None)
        else:
            self.commit_identifier += 1
            result = (
                open_table(str(self.root))
                .writes()
                .write_rows(
                    pa.Table.from_pylist(rows, schema=ARROW),
                    commit_user="pk-machine",
                    commit_identifier=self.commit_identifier,
                )
            )
            assert not result["alreadyCommitted"], result
        snapshot_id = self._new_snapshot(before, f"{writer} upsert")
        self.m.apply(rows, snapshot_id)
        for entry in self._live():
            if entry.file.file_name in old_names:
                continue
            assert entry.file.level == 0, f"{writer} wrote {entry.file.file_name} at level {entry.file.level}"
            floor = top[(entry.partition, entry.bucket)]
            assert entry.file.min_sequence_number > floor, (
                f"{writer}: new file {entry.file.file_name} of bucket {entry.bucket} starts at sequence "
                f"{entry.file.min_sequence_number}, not above the bucket's live maximum {floor}"
            )

    # -- rules ---------------------------------------------------------------------------------

    @rule(data=records)
    def pypaimon_upsert(self, data: st.DataObject) -> None:
        _count("pypaimon_upsert")
        self._write(self._draw_rows(data), "pypaimon")

    @rule(data=records)
    def our_upsert(self, data: st.DataObject) -> None:
        _count("our_upsert")
        self._write(self._draw_rows(data), "lakeformat")

    @rule(data=records, ours_first=st.booleans())
    def both_upsert(self, data: st.DataObject, ours_first: bool) -> None:
        """One write of each, in either order (writes are a quarter of the rules otherwise)."""
        _count("both_upsert")
        order = ["lakeformat", "pypaimon"] if ours_first else ["pypaimon", "lakeformat"]
        for writer in order:
            self._write(self._draw_rows(data), writer)

    @precondition(lambda self: self.model is not None and self.m.snapshots)
    @rule(mode=st.sampled_from(["full", "minor"]))
    def compact(self, mode: str) -> None:
        _count(f"compact_{mode}")
        entries = self._live()
        before_names = {e.file.file_name for e in entries}
        before_groups = {w: sorted(e.file.file_name for e in g) for w, g in buckets(entries).items()}
        runs_before = {w: _runs(g) for w, g in buckets(entries).items()}
        before = snapshot_ids_on_disk(self.root)
        result = open_table(str(self.root)).maintenance.compact_data(mode=mode).to_json()
        after = snapshot_ids_on_disk(self.root)
        if after == before:
            assert not result["filesWritten"] and not result["filesUpgraded"], result
        else:
            self.m.same_rows(self._new_snapshot(before, f"compact {mode}"))
        live = self._live()
        self.compact_files |= {e.file.file_name for e in live} - before_names
        groups = buckets(live)
        top = max_level(self.table().schema)
        for where, group in groups.items():
            levels = sorted(e.file.level for e in group)
            if mode == "full":
                assert set(levels) == {top}, f"full compaction left {where} at levels {levels} (max {top})"
                continue
            runs = _runs(group)
            assert runs <= runs_before.get(where, 0), f"minor compaction added runs to {where}: {levels}"
            if runs_before.get(where, 0) < self.trigger:
                names = sorted(e.file.file_name for e in group)
                assert names == before_groups[where], f"minor compaction touched {where} below the trigger"
            elif runs_before[where] > self.trigger:
                assert runs < runs_before[where], f"minor compaction left {where} at {runs} runs"

    @precondition(lambda self: self.model is not None and self.m.snapshots and len(self.m.tags) < len(TAGS))
    @rule(data=st.data(), via=st.sampled_from(["lakeformat", "pypaimon"]))
    def create_tag(self, data: st.DataObject, via: str) -> None:
        _count("create_tag")
        snapshot_id = data.draw(st.sampled_from(sorted(self.m.snapshots)), label="snapshot_id")
        name = data.draw(st.sampled_from([t for t in TAGS if t not in self.m.tags]), label="tag")
        if via == "pypaimon":
            self.worker.call("tag_create", path=str(self.root), name=name, snapshot_id=snapshot_id)
        else:
            open_table(str(self.root)).maintenance.create_tag(name, snapshot_id=snapshot_id)
        self.m.tag(name, snapshot_id)

    @precondition(lambda self: self.model is not None and self.m.tags)
    @rule(data=st.data(), via=st.sampled_from(["lakeformat", "pypaimon"]))
    def delete_tag(self, data: st.DataObject, via: str) -> None:
        _count("delete_tag")
        name = data.draw(st.sampled_from(sorted(self.m.tags)), label="tag")
        tag = self.table().snapshot_manager.tag(name)
        # Both delete the tag file only (Paimon's TagManager without cleanup): files only it used may stay.
        self.may_exist |= {e.file.file_name for e in self._live(tag)}
        if via == "pypaimon":
            assert self.worker.call("tag_delete", path=str(self.root), name=name)
        else:
            open_table(str(self.root)).maintenance.delete_tag(name)
        self.m.untag(name)

    @precondition(lambda self: self.model is not None and self.m.snapshots)
    @rule(retain_min=st.integers(1, 3))
    def expire_snapshots(self, retain_min: int) -> None:
        _count("expire_snapshots")
        time.sleep(0.003)  # every snapshot strictly older than the expiry's clock
        now = time.time()
        table = self.table()
        times = {i: table.snapshot_manager.snapshot(i).time_millis for i in snapshot_ids_on_disk(self.root)}
        expected = expected_expired_ids(
            times,
            {},
            retain_min=retain_min,
            retain_max=None,
            older_than_millis=0,
            expire_limit=EXPIRE_LIMIT,
            now_millis=int(now * 1000),
        )
        result = expiry.expire_snapshots(
            table, dry_run=False, retain_min=retain_min, older_than=timedelta(0), clock=lambda: now
        )
        assert result.plan.expired_ids == expected, (
            f"expiry removed {result.plan.expired_ids}, Paimon's rule says {expected}"
        )
        self.m.expire(expected)

    @rule(plant=st.booleans())
    def remove_orphans(self, plant: bool) -> None:
        """Age every file by 10 days (every file becomes a candidate), maybe plant an orphan, clean up."""
        _count("remove_orphans")
        planted = None
        if plant:
            planted = (
                self.root
                / f"p={PARTITIONS[0]}"
                / "bucket-0"
                / f"data-orphan{len(self.may_exist)}-{time.monotonic_ns()}.parquet"
            )
            planted.parent.mkdir(parents=True, exist_ok=True)
            planted.write_bytes(b"orphan")
        old = time.time() - OLD_SECONDS
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                os.utime(os.path.join(directory, name), (old, old))
        orphans.remove_orphan_files(self.table(), dry_run=False, older_than=timedelta(days=1))
        assert planted is None or not planted.exists(), f"orphan cleanup kept {planted}"
        self.may_exist &= set(data_files_on_disk(self.root))

    @precondition(lambda self: self.model is not None and self.m.snapshots)
    @rule(day=st.sampled_from([2, 3, 4]))
    def expire_partitions(self, day: int) -> None:
        """values-time, 1 day: ``now`` = 2024-01-0<day> 00:00, so partitions before day-1 go (strictly)."""
        _count("expire_partitions")
        now = datetime(2024, 1, day)
        gone = [p for p in PARTITIONS if datetime.fromisoformat(p) < now - timedelta(days=1)]
        physical = {self.table_partition(e) for e in self._live()}
        before = snapshot_ids_on_disk(self.root)
        result = open_table(str(self.root)).maintenance.expire_partitions(
            expiration_time="1 d", timestamp_formatter="yyyy-MM-dd", now=now
        )
        dropped = sorted(physical & set(gone))
        if not dropped:
            assert snapshot_ids_on_disk(self.root) == before, f"nothing to expire, yet a commit: {result}"
            return
        self.m.drop_partitions(dropped, self._new_snapshot(before, "expire partitions"))
        left = {self.table_partition(e) for e in self._live()}
        assert not left & set(gone), f"partitions {sorted(left & set(gone))} survived their expiry"

    def table_partition(self, entry: ManifestEntry) -> str:
        from airflow_lakeformat.core.paimon.paths import DataFilePaths

        return str(DataFilePaths(self.table().schema).partitions.to_json(entry.partition)["p"])

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def table_is_sound(self) -> None:
        if self.model is None:
            return
        m = self.m
        ids = snapshot_ids_on_disk(self.root)
        assert ids == sorted(m.snapshots), f"snapshots on disk {ids}, model {sorted(m.snapshots)}"
        tag_dir = self.root / "tag"
        tags = sorted(n[len("tag-") :] for n in os.listdir(tag_dir)) if tag_dir.is_dir() else []
        assert tags == sorted(m.tags), f"tags on disk {tags}, model {sorted(m.tags)}"
        if not ids:
            return
        self._pypaimon_reads_the_model(ids, tags)
        problems = check_pk_table(str(self.root), compact_files=self.compact_files)
        assert not problems, "structural checker: " + "; ".join(problems[:10])
        self._no_file_missing_or_stray(ids, tags)

    def _pypaimon_reads_the_model(self, ids: list[int], tags: list[str]) -> None:
        others = [("snapshots", str(i)) for i in ids[:-1]] + [("tags", t) for t in tags]
        extra = others[self.rotation % len(others)] if others else None
        self.rotation += 1
        sample_snaps = [ids[-1]] + ([int(extra[1])] if extra and extra[0] == "snapshots" else [])
        sample_tags = [extra[1]] if extra and extra[0] == "tags" else []
        verified = self.worker.call(
            "verify", path=str(self.root), snapshots=sample_snaps, tags=sample_tags, merge_lone_level0=True
        )
        for section, key, want in [("snapshots", str(s), self.m.snapshots[s]) for s in sample_snaps] + [
            ("tags", t, self.m.tag_rows[t]) for t in sample_tags
        ]:
            item = verified[section][key]
            assert "error" not in item, f"pypaimon cannot read {section[:-1]} {key}: {item['error']}"
            got = canonical({c: r.get(c) for c in COLUMNS} for r in item["rows"])
            assert got == want, (
                f"pypaimon reads {section[:-1]} {key} as {got}, the model has {want} "
                f"(missing {sorted(set(want) - set(got), key=str)}, extra {sorted(set(got) - set(want), key=str)})"
            )

    def _no_file_missing_or_stray(self, ids: list[int], tags: list[str]) -> None:
        table = self.table()
        manager = table.snapshot_manager
        referenced: set[str] = set()
        for snapshot in [manager.snapshot(i) for i in ids] + [manager.tag(t) for t in tags]:
            referenced |= {e.file.file_name for e in live_entries(table, snapshot)}
        on_disk = data_files_on_disk(self.root)
        missing = sorted(referenced - set(on_disk))
        assert not missing, f"files a retained snapshot or tag references are gone: {missing}"
        stray = sorted(set(on_disk) - referenced - self.may_exist)
        assert not stray, f"unreferenced data files: {[on_disk[s] for s in stray]}"


def _runs(group: list[ManifestEntry]) -> int:
    """Sorted runs of a bucket: one per level-0 file, one per non-empty higher level."""
    levels = [e.file.level for e in group]
    return levels.count(0) + len({lv for lv in levels if lv})
