"""Primary-key (merge-tree) tables for the compaction tests: prepared pypaimon tables and a structural checker.

**Fixture tables.** ``tests/fixtures/paimon_pk/pk-tables.tar.gz`` holds a warehouse written by pypaimon 2.1
(``tests/interop/pypaimon_pk_scenarios.py`` says what each table holds) and ``build.json``, the build document
with table paths relative to the warehouse. :func:`make_fixture_archive` (``scripts/make_paimon_pk_fixtures.py``)
builds it ONCE; tests unpack it once per session (fixture ``paimon_pk_pristine``) and copy one table per test
(fixture ``paimon_pk_tables``; import both ``*_fixture`` functions into a test module), so no test pays pypaimon's writes.

**Structural checker** (O2 of the reference's test plan), :func:`check_pk_table` on the live files of a
snapshot. Per file: the physical columns are ``_KEY_<k>...``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND`` and the
fields (a thin file without ``_KEY_*`` columns is accepted); keys strictly ascending in Java's order (nulls
first, strings and binaries as unsigned bytes) hence unique; ``_KEY_x == x``; ``_SEQUENCE_NUMBER`` min/max,
``_ROW_COUNT``, ``_FILE_SIZE`` and ``_DELETE_ROW_COUNT`` (kinds -U and -D; never null) exact, except that a
level-0 APPEND file may say 0 (pypaimon 2.1 always writes 0; at a level >= 1 a wrong 0 would make raw reads
return the retractions, so it counts there);
``_MIN_KEY``/``_MAX_KEY``/``_KEY_STATS`` byte-equal to a re-encode of the file's keys; the value statistics
of the columns ``_VALUE_STATS_COLS`` includes equal the file's exact min/max/null counts (a string or binary
bound shorter than the value must bound it: ``truncate(16)``, the default stats mode); ``_FILE_SOURCE`` set
(COMPACT for the files a compaction wrote); ``_LEVEL`` within ``[0, max level]``. Per bucket: every level >= 1
non-overlapping; the LSM invariant (a key's sequence numbers in a lower level are all greater than in any
higher level); per partition one ``_TOTAL_BUCKETS``.

Example:
    >>> problems = check_pk_table("/tmp/wh/db.db/pk_dedup")  # doctest: +SKIP
    >>> assert problems == [], problems  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.arrow_types import internal_values
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table

REPO_ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = REPO_ROOT / "tests" / "fixtures" / "paimon_pk" / "pk-tables.tar.gz"
BUILD_DOCUMENT = "build.json"
SEQ, KIND = "_SEQUENCE_NUMBER", "_VALUE_KIND"
RETRACT_KINDS = (1, 3)  # -U, -D


# ---- fixture tables ------------------------------------------------------------------------------


def make_fixture_archive(archive: Path = ARCHIVE) -> dict[str, Any]:
    """Build the tables with pypaimon (the oracle's ``pk-build``) and pack them with ``build.json``."""
    from tests.support.pypaimon import run_oracle

    with tempfile.TemporaryDirectory(prefix="paimon-pk-") as scratch:
        warehouse = Path(scratch) / "warehouse"
        document: dict[str, Any] = run_oracle("pk-build", warehouse)
        root = str(Path(document["warehouse"]).resolve())
        for table in document["tables"].values():
            table["path"] = os.path.relpath(table["path"], root)
        document["warehouse"] = "."
        (warehouse / BUILD_DOCUMENT).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        archive.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "w:gz") as tar:
            for path in sorted(warehouse.rglob("*")):
                info = tar.gettarinfo(str(path), str(path.relative_to(warehouse)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if path.is_file():
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
                else:
                    tar.addfile(info)
    return document


@pytest.fixture(scope="session", name="paimon_pk_pristine")
def paimon_pk_pristine_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The archive unpacked once per session: (warehouse, build document). Read-only: copy a table first."""
    target = tmp_path_factory.mktemp("paimon-pk")
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(target, filter="data")
    return target, json.loads((target / BUILD_DOCUMENT).read_text())


@pytest.fixture(name="paimon_pk_tables")
def paimon_pk_tables_fixture(
    paimon_pk_pristine: tuple[Path, dict[str, Any]], tmp_path: Path
) -> Callable[[str], tuple[str, dict[str, Any]]]:
    """``copy(name) -> (path, summary)``: a private copy of one fixture table, in a ``db.db`` directory as
    pypaimon's filesystem catalog lays it out (the summary is the build document's entry)."""
    warehouse, document = paimon_pk_pristine

    def copy(name: str) -> tuple[str, dict[str, Any]]:
        summary = dict(document["tables"][name])
        target = tmp_path / "warehouse" / summary["path"]
        shutil.copytree(warehouse / summary["path"], target)
        summary["path"] = str(target)
        return str(target), summary

    return copy


def listing(path: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """Every file under ``path``: relative name -> (size, mtime_ns). Equal listings = nothing written."""
    result = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            stat = os.stat(full)
            result[os.path.relpath(full, path)] = (stat.st_size, stat.st_mtime_ns)
    return result


# ---- sorted runs ---------------------------------------------------------------------------------


def buckets(entries: Iterable[ManifestEntry]) -> dict[tuple[bytes, int], list[ManifestEntry]]:
    """Live entries grouped by (partition bytes, bucket)."""
    grouped: dict[tuple[bytes, int], list[ManifestEntry]] = defaultdict(list)
    for entry in entries:
        grouped[(entry.partition, entry.bucket)].append(entry)
    return dict(grouped)


def sorted_runs(entries: Sequence[ManifestEntry]) -> int:
    """Paimon's count of sorted runs in one bucket: each level-0 file, plus each non-empty level >= 1."""
    levels = [e.file.level for e in entries]
    return sum(1 for level in levels if level == 0) + len({level for level in levels if level > 0})


def max_level(schema: TableSchema) -> int:
    """``num-levels - 1``; ``num-levels`` defaults to ``num-sorted-run.compaction-trigger + 1`` (5 + 1)."""
    options = schema.options
    trigger = int(options.get("num-sorted-run.compaction-trigger", "5"))
    return int(options.get("num-levels", trigger + 1)) - 1


# ---- the structural checker ----------------------------------------------------------------------


def java_order(value: Any) -> tuple[int, Any]:
    """A sort key in the order of Java's key comparator: nulls first, strings/binaries as unsigned bytes."""
    if value is None:
        return (0, 0)
    if isinstance(value, str):
        return (1, value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray)):
        return (1, bytes(value))
    return (1, value)


def _key_tuple(values: Sequence[Any]) -> tuple[tuple[int, Any], ...]:
    return tuple(java_order(v) for v in values)


class _FileCheck:
    """The per-file checks of one live file; collects its keys and sequence numbers for the bucket checks."""

    def __init__(self, table: Table, schema: TableSchema, entry: ManifestEntry, where: str) -> None:
        self.schema = schema
        self.entry = entry
        self.where = where
        self.problems: list[str] = []
        self.keys: list[tuple[tuple[int, Any], ...]] = []
        self.seqs: list[int] = []
        path = table.io.join(table.root, DataFilePaths(schema).relative_path(entry))
        data = table.io.read_bytes(path)
        meta = entry.file
        self.expect(meta.file_size == len(data), f"_FILE_SIZE {meta.file_size} != {len(data)} bytes")
        self.arrow: pa.Table | None = None
        try:
            self.arrow = pq.ParquetFile(pa.BufferReader(data)).read()
        except pa.ArrowInvalid as exc:
            self.expect(False, f"not a Parquet file ({exc})")

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.problems.append(f"{self.where}: {message}")

    def run(self, max_lvl: int, compact_files: set[str]) -> list[str]:
        meta, arrow, schema = self.entry.file, self.arrow, self.schema
        if arrow is None:
            return self.problems
        key_names = list(schema.trimmed_primary_keys)
        key_types = [schema.field(k).type for k in key_names]
        fields = [f.name for f in schema.fields]
        key_columns = [f"_KEY_{k}" for k in key_names]
        thin = not any(c in arrow.column_names for c in key_columns)
        expected = ([] if thin else key_columns) + [SEQ, KIND] + fields
        self.expect(arrow.column_names == expected, f"columns {arrow.column_names} != {expected}")
        if arrow.column_names != expected:
            return self.problems
        self.expect(meta.row_count == arrow.num_rows, f"_ROW_COUNT {meta.row_count} != {arrow.num_rows} rows")
        key_values = [internal_values(arrow.column(k), t) for k, t in zip(key_names, key_types, strict=True)]
        if not thin:
            for name in key_names:
                self.expect(arrow.column(f"_KEY_{name}").to_pylist() == arrow.column(name).to_pylist(),
                            f"_KEY_{name} differs from {name}")  # fmt: skip
        rows = list(zip(*key_values, strict=True)) if key_names else [() for _ in range(arrow.num_rows)]
        self.keys = [_key_tuple(r) for r in rows]
        self.expect(all(a < b for a, b in itertools.pairwise(self.keys)), "keys not strictly ascending")
        self.seqs = arrow.column(SEQ).to_pylist()
        if self.seqs:
            self.expect(
                (meta.min_sequence_number, meta.max_sequence_number) == (min(self.seqs), max(self.seqs)),
                f"sequence range {meta.min_sequence_number}..{meta.max_sequence_number} != "
                f"{min(self.seqs)}..{max(self.seqs)}",
            )
        retracts = sum(1 for kind in arrow.column(KIND).to_pylist() if kind in RETRACT_KINDS)
        count = meta.delete_row_count
        if meta.file_source == FileSource.APPEND and meta.level == 0 and count == 0:
            pass  # pypaimon 2.1 writes 0 whatever the file holds (write/writer/data_writer.py)
        else:
            self.expect(count == retracts, f"_DELETE_ROW_COUNT {count} != {retracts} retractions")
        if rows:
            self.expect(meta.min_key == binary_row.encode(rows[0], key_types), "_MIN_KEY != the first key")
            self.expect(meta.max_key == binary_row.encode(rows[-1], key_types), "_MAX_KEY != the last key")
        self._check_stats("_KEY_STATS", meta.key_stats, key_names, key_types, key_values)
        self._check_value_stats()
        self.expect(meta.file_source is not None, "_FILE_SOURCE is null")
        if meta.file_name in compact_files:
            self.expect(meta.file_source == FileSource.COMPACT, f"_FILE_SOURCE {meta.file_source} != COMPACT")
        self.expect(0 <= meta.level <= max_lvl, f"_LEVEL {meta.level} outside 0..{max_lvl}")
        return self.problems

    def _check_value_stats(self) -> None:
        cols = self.entry.file.value_stats_cols
        names = [f.name for f in self.schema.fields] if cols is None else list(cols)
        types = [self.schema.field(n).type for n in names]
        assert self.arrow is not None
        values = [internal_values(self.arrow.column(n), t) for n, t in zip(names, types, strict=True)]
        self._check_stats("_VALUE_STATS", self.entry.file.value_stats, names, types, values)

    def _check_stats(
        self, label: str, stats: Any, names: list[str], types: list[Any], columns: list[list[Any]]
    ) -> None:
        """``stats`` equal to the exact min/max/null counts of ``columns`` (decoded, then byte-compared)."""
        mins, maxs, nulls = [], [], []
        for values in columns:
            present = [v for v in values if v is not None]
            mins.append(min(present, key=java_order) if present else None)
            maxs.append(max(present, key=java_order) if present else None)
            nulls.append(len(values) - len(present))
        if not names:
            return
        arities = (binary_row.arity_of(stats.min_values), binary_row.arity_of(stats.max_values))
        if arities != (len(names), len(names)):
            self.expect(False, f"{label} rows have arity {arities}, not {len(names)} ({names})")
            return
        got_min = binary_row.decode(stats.min_values, types)
        got_max = binary_row.decode(stats.max_values, types)
        if label == "_VALUE_STATS":  # truncate(16) by default: a long string's bounds only bound it
            got_min = [_bounded(g, m, below=True) for g, m in zip(got_min, mins, strict=True)]
            got_max = [_bounded(g, m, below=False) for g, m in zip(got_max, maxs, strict=True)]
        self.expect(got_min == mins, f"{label} min {dict(zip(names, got_min, strict=True))} != {mins}")
        self.expect(got_max == maxs, f"{label} max {dict(zip(names, got_max, strict=True))} != {maxs}")
        self.expect(
            list(stats.null_counts or []) == nulls, f"{label} null counts {stats.null_counts} != {nulls}"
        )
        if label == "_KEY_STATS" and got_min == mins and got_max == maxs:
            self.expect(stats.min_values == binary_row.encode(mins, types), f"{label} min bytes differ")
            self.expect(stats.max_values == binary_row.encode(maxs, types), f"{label} max bytes differ")


def _bounded(got: Any, exact: Any, *, below: bool) -> Any:
    """``exact`` when ``got`` is a truncated bound of that string or binary value (Paimon's ``truncate(n)``
    stats mode keeps the first n characters of a min, and of a max with its last character incremented, or
    no max at all); ``got`` otherwise, so that the comparison with ``exact`` fails."""
    if not isinstance(exact, (str, bytes)) or not isinstance(got, (type(exact), type(None))):
        return got
    if got is None:
        return exact if not below and len(exact) > 16 else got
    if len(got) >= len(exact):
        return got
    order = java_order(got) <= java_order(exact) if below else java_order(got) >= java_order(exact)
    return exact if order else got


def _check_bucket(where: str, files: list[_FileCheck]) -> list[str]:
    """Levels >= 1 non-overlapping; for each key, sequence numbers in lower levels > in higher levels."""
    problems = []
    by_level: dict[int, list[_FileCheck]] = defaultdict(list)
    for f in files:
        by_level[f.entry.file.level].append(f)
    for level, level_files in sorted(by_level.items()):
        if level == 0:
            continue
        ranges = sorted((f.keys[0], f.keys[-1], f.entry.file.file_name) for f in level_files if f.keys)
        for (_lo, hi, name), (lo2, _hi2, name2) in itertools.pairwise(ranges):
            if not hi < lo2:
                problems.append(f"{where}: level {level} files {name} and {name2} overlap")
    seqs: dict[Any, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for f in files:
        for key, seq in zip(f.keys, f.seqs, strict=True):
            seqs[key][f.entry.file.level].append(seq)
    for key, levels in seqs.items():
        ordered = sorted(levels.items())
        for (low, low_seqs), (high, high_seqs) in itertools.pairwise(ordered):
            if min(low_seqs) <= max(high_seqs):
                problems.append(
                    f"{where}: key {key}: sequence {min(low_seqs)} at level {low} <= {max(high_seqs)} at level {high}"
                )
    return problems


def check_pk_table(
    path: str, snapshot: Snapshot | None = None, compact_files: Iterable[str] = ()
) -> list[str]:
    """Every structural problem of the live files of ``snapshot`` (default: the latest); [] when clean.

    Args:
        path: the table directory.
        snapshot: the snapshot to check; the latest when None.
        compact_files: names of files a compaction wrote (they must say ``_FILE_SOURCE=COMPACT``).
    """
    table = Table.open(path)
    snapshot = snapshot or table.snapshot_manager.latest_snapshot()
    assert snapshot is not None, f"{path} has no snapshot"
    entries = live_entries(table, snapshot)
    problems: list[str] = []
    codec = DataFilePaths(table.schema).partitions
    totals: dict[bytes, set[int | None]] = defaultdict(set)
    for (partition, bucket), bucket_entries in sorted(buckets(entries).items()):
        where = f"{codec.to_json(partition)}/bucket-{bucket}"
        checks = []
        for entry in bucket_entries:
            totals[partition].add(entry.total_buckets)
            schema = table.schema_by_id(entry.file.schema_id)
            check = _FileCheck(table, schema, entry, f"{where}/{entry.file.file_name}@L{entry.file.level}")
            problems += check.run(max_level(table.schema), set(compact_files))
            checks.append(check)
        problems += _check_bucket(where, checks)
    problems += [
        f"{codec.to_json(p)}: _TOTAL_BUCKETS {sorted(map(str, t))}" for p, t in totals.items() if len(t) != 1
    ]
    return problems


def runs_per_bucket(path: str) -> dict[tuple[str, int], list[int]]:
    """Latest snapshot: (partition as JSON text, bucket) -> sorted levels of its live files."""
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    codec = DataFilePaths(table.schema).partitions
    return {
        (json.dumps(codec.to_json(p), ensure_ascii=False), b): sorted(e.file.level for e in group)
        for (p, b), group in buckets(live_entries(table, snapshot)).items()
    }


def live_key_sequences(
    path: str, snapshot: Snapshot | None = None
) -> dict[tuple[str, int], dict[Any, list[int]]]:
    """(partition as JSON text, bucket) -> trimmed primary key (a tuple) -> the ``_SEQUENCE_NUMBER`` of each
    live record of that key (every level, every kind), read straight from the data files."""
    table = Table.open(path)
    snapshot = snapshot or table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    paths = DataFilePaths(table.schema)
    keys = list(table.schema.trimmed_primary_keys)
    result: dict[tuple[str, int], dict[Any, list[int]]] = defaultdict(lambda: defaultdict(list))
    for entry in live_entries(table, snapshot):
        data = table.io.read_bytes(table.io.join(table.root, paths.relative_path(entry)))
        arrow = pq.ParquetFile(pa.BufferReader(data)).read(columns=[*keys, SEQ])
        where = (json.dumps(paths.partitions.to_json(entry.partition), ensure_ascii=False), entry.bucket)
        columns = [arrow.column(k).to_pylist() for k in keys]
        for key, seq in zip(zip(*columns, strict=True), arrow.column(SEQ).to_pylist(), strict=True):
            result[where][key].append(seq)
    return {where: dict(by_key) for where, by_key in result.items()}
