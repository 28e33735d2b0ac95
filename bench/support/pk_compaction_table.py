"""The primary-key compaction benchmark's table, its raw floor and its checks (``bench_paimon_pk_compaction.py``).

**The table** (``Shape``): an unpartitioned Paimon primary-key table (deduplicate engine, ``bucket`` fixed
buckets, key ``k BIGINT``; values ``name STRING``, ``amount DOUBLE``, ``qty INT``, ``ts TIMESTAMP(3)``) whose
rows all sit in level-0 files, as a streaming writer leaves them before any compaction. Keys go to their bucket by
Paimon's hash (``write/bucketing.row_buckets``). Each bucket gets ``files`` level-0 files: 60 % hold the inserts
(+I) of the bucket's keys, 40 % hold updates of a hot set (the keys of the first insert files, about 5 updates per
hot key across files), of which 6 % are deletes (-D; some keys come back through a later update). Files are
interleaved as a writer would flush them (10 insert files, then insert and update files alternately), each
sorted by key with unique keys and sequence numbers in arrival order, contiguous per bucket. Rows add up to
``rows`` exactly (insert files absorb the difference). They are written with the compaction's own KV writer
(``merge_tree.kv_files.write_kv`` at level 0; the returned ``DataFileMeta`` re-created with ``fileSource``
APPEND, as a writer's flush records it) and committed through the ``Committer``: one APPEND snapshot per
round holding one file of every bucket. Built once under ``bench/.work/paimon-pk-compaction/<name>/`` with
``facts.json`` (the expected answer, computed from the generated events: the live keys and a checksum of
their rows) and copied afresh before every measurement, since compaction changes the table.

**The raw floor** (:func:`raw_floor`): per bucket, ``pq.read_table`` of every file, one table, sort indices by key
then sequence number, the last row per key found on the sorted key column, rows of kind -U/-D dropped, only the
survivors gathered, one ``pq.write_table`` with the table's codec (zstd 1). No metadata, no statistics, no
commit.

**Checksums** (:func:`rows_checksum`): over the live rows sorted by key, a sha256 of key, sequence number, kind
and every value column; the same function serves the generated answer, the floor's output and the compacted
table, so all three must agree exactly.

Example::

    shape = Shape()
    cached = ensure_table(shape)            # builds once
    live = restore(shape, WORK / "live")    # a fresh copy to compact
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.support.runs import DEFAULT_WORK_DIR

WORK = DEFAULT_WORK_DIR / "paimon-pk-compaction"
FIELDS = [
    {"name": "k", "type": "BIGINT NOT NULL"},
    {"name": "name", "type": "STRING"},
    {"name": "amount", "type": "DOUBLE"},
    {"name": "qty", "type": "INT"},
    {"name": "ts", "type": "TIMESTAMP(3)"},
]
VALUES = ["k", "name", "amount", "qty", "ts"]
INSERT, UPDATE_AFTER, DELETE = 0, 2, 3
DELETE_SHARE = 0.06
UPDATES_PER_HOT_KEY = 5
EARLY_INSERT_FILES = 10


@dataclass(frozen=True)
class Shape:
    """The table's size: total rows, level-0 files and fixed buckets."""

    rows: int = 2_000_000
    files: int = 400
    buckets: int = 8
    seed: int = 27

    @property
    def name(self) -> str:
        return f"r{self.rows}-f{self.files}-b{self.buckets}-s{self.seed}"

    @property
    def files_per_bucket(self) -> int:
        return self.files // self.buckets


@dataclass
class BucketEvents:
    """One bucket's files in write order: per file the keys (sorted), their sequence numbers and kinds."""

    bucket: int
    files: list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def _split_files(shape: Shape) -> tuple[int, int, int]:
    """(insert files, update files, rows per update file) of one bucket."""
    per_bucket = shape.files_per_bucket
    updates = max(1, int(per_bucket * 0.4))
    inserts = per_bucket - updates
    update_rows = int(shape.rows * 0.4) // (shape.buckets * updates)
    return inserts, updates, update_rows


def bucket_keys(shape: Shape) -> list[np.ndarray]:
    """The distinct keys of every bucket (Paimon's bucket of each key), each shuffled."""
    from airflow_lakeformat.core.paimon.types import parse_type
    from airflow_lakeformat.core.paimon.write.bucketing import row_buckets

    _inserts, updates, update_rows = _split_files(shape)
    distinct = shape.rows - shape.buckets * updates * update_rows
    rng = np.random.default_rng(shape.seed)
    keys = rng.permutation(np.arange(1, distinct + 1, dtype=np.int64) * 7919)
    assigned = np.asarray(
        row_buckets(pa.table({"k": keys}), ["k"], [parse_type("BIGINT NOT NULL")], shape.buckets)
    )
    return [keys[assigned == b] for b in range(shape.buckets)]


def bucket_events(shape: Shape, bucket: int, keys: np.ndarray) -> BucketEvents:
    """One bucket's level-0 files: insert files of all its keys, update files of a hot set, interleaved."""
    inserts, updates, update_rows = _split_files(shape)
    rng = np.random.default_rng(shape.seed * 1000 + bucket)
    insert_files = np.array_split(keys, inserts)
    early = np.concatenate(insert_files[:EARLY_INSERT_FILES])
    hot_size = max(update_rows, min(len(early), updates * update_rows // UPDATES_PER_HOT_KEY))
    hot = early[:hot_size]
    update_files = [rng.choice(hot, size=update_rows, replace=False) for _ in range(updates)]
    order: list[tuple[str, int]] = [("i", i) for i in range(min(EARLY_INSERT_FILES, inserts))]
    rest_i = list(range(len(order), inserts))
    rest_u = list(range(updates))
    while rest_i or rest_u:
        if rest_i:
            order.append(("i", rest_i.pop(0)))
        if rest_u:
            order.append(("u", rest_u.pop(0)))
    files = []
    next_seq = 0
    for kind, index in order:
        file_keys = insert_files[index] if kind == "i" else update_files[index]
        seqs = next_seq + rng.permutation(len(file_keys)).astype(
            np.int64
        )  # arrival order, then sorted by key
        next_seq += len(file_keys)
        kinds = np.full(len(file_keys), INSERT, dtype=np.int8)
        if kind == "u":
            kinds[:] = UPDATE_AFTER
            kinds[rng.random(len(file_keys)) < DELETE_SHARE] = DELETE
        by_key = np.argsort(file_keys, kind="stable")
        files.append((file_keys[by_key], seqs[by_key], kinds[by_key]))
    return BucketEvents(bucket, files)


def values_for(keys: np.ndarray, seqs: np.ndarray) -> dict[str, pa.Array]:
    """Value columns derived from (key, sequence): every version of a key differs, deterministically."""
    mix = (keys * 2654435761 + seqs * 40503) & 0x7FFFFFFF
    name = pc.binary_join_element_wise(
        pa.array(np.full(len(keys), "customer-")), pa.array(mix % 10_000_019).cast(pa.string()), ""
    )
    return {
        "k": pa.array(keys),
        "name": name,
        "amount": pa.array((mix % 1_000_003) / 100.0),
        "qty": pa.array((mix % 997).astype(np.int32)),
        "ts": pa.array(1_732_000_000_000 + seqs * 37, pa.int64()).cast(pa.timestamp("ms")),
    }


def kv_table(schema: Any, keys: np.ndarray, seqs: np.ndarray, kinds: np.ndarray) -> pa.Table:
    """One file's KV table in the table's physical layout."""
    from airflow_lakeformat.core.paimon.merge_tree.kv_schema import kv_arrow_schema

    target = kv_arrow_schema(schema)
    columns = {"_KEY_k": pa.array(keys), "_SEQUENCE_NUMBER": pa.array(seqs), "_VALUE_KIND": pa.array(kinds)}
    columns.update(values_for(keys, seqs))
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in target], schema=target)


def expected_facts(events: Sequence[BucketEvents]) -> dict[str, Any]:
    """The answer from the generated events alone: per key the last version, deletes dropped."""
    keys = np.concatenate([f[0] for b in events for f in b.files])
    seqs = np.concatenate([f[1] for b in events for f in b.files])
    kinds = np.concatenate([f[2] for b in events for f in b.files])
    order = np.lexsort((seqs, keys))
    keys, seqs, kinds = keys[order], seqs[order], kinds[order]
    last = np.append(keys[1:] != keys[:-1], True)
    live = last & (kinds != DELETE)
    kept = pa.table({"k": keys[live], "_SEQUENCE_NUMBER": seqs[live], "_VALUE_KIND": kinds[live]})
    values = values_for(keys[live], seqs[live])
    for name in VALUES[1:]:
        kept = kept.append_column(name, values[name])
    return {
        "rows": len(keys),
        "distinctKeys": int(last.sum()),
        "liveKeys": int(live.sum()),
        "deleteRows": int((kinds == DELETE).sum()),
        "checksum": rows_checksum(kept),
    }


def rows_checksum(rows: pa.Table) -> str:
    """sha256 over the rows sorted by key: key, sequence number, kind and the value columns."""
    rows = rows.sort_by("k")
    digest = hashlib.sha256()
    for name in ("k", "_SEQUENCE_NUMBER", "_VALUE_KIND", "amount", "qty"):
        column = rows.column(name).combine_chunks()
        digest.update(np.ascontiguousarray(column.to_numpy(zero_copy_only=False)).tobytes())
    digest.update(rows.column("ts").cast(pa.int64()).combine_chunks().to_numpy().tobytes())
    digest.update("\x1f".join(rows.column("name").to_pylist()).encode())
    return digest.hexdigest()


def build(shape: Shape, root: Path) -> dict[str, Any]:
    """Create and fill the table at ``root``; its facts (the expected answer and the build's figures)."""
    from airflow_lakeformat.core.paimon import binary_row
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
    from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry
    from airflow_lakeformat.core.paimon.merge_tree.kv_files import write_kv

    started = time.perf_counter()
    table = create_table(str(root), schema_from_fields(FIELDS, [], ["k"], {"bucket": str(shape.buckets)}))
    events = [bucket_events(shape, b, keys) for b, keys in enumerate(bucket_keys(shape))]
    committer = Committer(table, "bench-pk-writer")
    partition = binary_row.encode([], [])
    for round_index in range(shape.files_per_bucket):
        entries = []
        for bucket in events:
            keys, seqs, kinds = bucket.files[round_index]
            metas = write_kv(table, table.schema, partition=partition, bucket=bucket.bucket,
                             total_buckets=shape.buckets, level=0,
                             data=[kv_table(table.schema, keys, seqs, kinds)],
                             target_file_size=1 << 40)  # fmt: skip
            for meta in metas:
                flushed = DataFileMeta({**meta.record, "_FILE_SOURCE": int(FileSource.APPEND)})
                entries.append(ManifestEntry.create(FileKind.ADD, partition, bucket.bucket,
                                                    shape.buckets, flushed))  # fmt: skip
        committer.commit(entries)
    facts = expected_facts(events)
    facts["buildSeconds"] = round(time.perf_counter() - started, 1)
    return facts


def ensure_table(shape: Shape, rebuild: bool = False) -> tuple[Path, dict[str, Any]]:
    """The cached table (built once) and its facts."""
    home = WORK / shape.name
    root, facts_path = home / "table", home / "facts.json"
    if rebuild and home.exists():
        shutil.rmtree(home)
    if not facts_path.exists():
        if root.exists():
            shutil.rmtree(root)
        root.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {shape.name} (once) ...", file=sys.stderr)
        facts = build(shape, root)
        facts_path.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return root, json.loads(facts_path.read_text(encoding="utf-8"))


def restore(shape: Shape, live: Path) -> Path:
    """A fresh full copy of the cached table at ``live`` (compaction adds and commits files there)."""
    if live.exists():
        shutil.rmtree(live)
    shutil.copytree(WORK / shape.name / "table", live)
    return live


def bucket_files(root: Path) -> dict[int, list[Path]]:
    """The live data files of every bucket (planning through the core, untimed)."""
    from airflow_lakeformat.core.paimon.live_files import live_entries
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(root))
    out: dict[int, list[Path]] = {}
    for entry in live_entries(table, table.snapshot_manager.latest_snapshot()):
        out.setdefault(entry.bucket, []).append(root / f"bucket-{entry.bucket}" / entry.file.file_name)
    return out


def raw_floor(files: dict[int, list[Path]], out_dir: Path) -> dict[str, Any]:
    """Per bucket: read every file, sort by key and sequence, keep the last per key, drop -U/-D, write one file."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    rows = written = 0
    started = time.perf_counter()
    for bucket, paths in sorted(files.items()):
        data = pa.concat_tables([pq.read_table(p) for p in paths])
        order = pc.sort_indices(data, [("_KEY_k", "ascending"), ("_SEQUENCE_NUMBER", "ascending")])
        key = data.column("_KEY_k").take(order).combine_chunks()
        last = pa.concat_arrays([pc.not_equal(key.slice(0, len(key) - 1), key.slice(1)), pa.array([True])])
        retract = pc.is_in(data.column("_VALUE_KIND").take(order), value_set=pa.array([1, 3], pa.int8()))
        data = data.take(order.filter(pc.and_not(last, retract)))  # only the survivors are gathered
        path = out_dir / f"bucket-{bucket}.parquet"
        pq.write_table(data, path, compression="zstd", compression_level=1)
        rows += data.num_rows
        written += path.stat().st_size
    return {"seconds": time.perf_counter() - started, "rows": rows, "bytes": written}


def floor_checksum(out_dir: Path) -> str:
    return rows_checksum(pq.read_table(sorted(out_dir.glob("*.parquet"))))


def compacted_facts(root: Path) -> dict[str, Any]:
    """After a full compaction: per bucket its levels and whether its files form one sorted run; the rows."""
    from airflow_lakeformat.core.paimon.live_files import live_entries
    from airflow_lakeformat.core.paimon.merge_tree.levels import num_levels, schema_key_order
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(root))
    entries = live_entries(table, table.snapshot_manager.latest_snapshot())
    order = schema_key_order(table.schema)
    max_level = num_levels(table.schema.table_options, []) - 1
    by_bucket: dict[int, list[Any]] = {}
    for entry in entries:
        by_bucket.setdefault(entry.bucket, []).append(entry.file)
    one_run = True
    for files in by_bucket.values():
        files.sort(key=lambda f: order(f.min_key))
        one_run &= all(f.level == max_level for f in files)
        one_run &= all(order(a.max_key) < order(b.min_key) for a, b in itertools.pairwise(files))
    rows = pq.read_table([root / f"bucket-{e.bucket}" / e.file.file_name for e in entries])
    return {
        "files": len(entries),
        "buckets": len(by_bucket),
        "maxLevel": max_level,
        "oneSortedRunAtMaxLevelPerBucket": one_run,
        "rows": rows.num_rows,
        "retractionsLeft": int(
            pc.sum(pc.is_in(rows.column("_VALUE_KIND"), pa.array([1, 3], pa.int8()))).as_py() or 0
        ),
        "checksum": rows_checksum(rows),
    }
