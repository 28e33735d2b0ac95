"""Iceberg data compaction decodes each manifest once per run (``write.manifest_cache``), and the validation of
its commit still reads the manifests committed since the start: a position delete that lands on an input file
while the groups are rewritten fails the commit (nothing replaced, the delete kept)."""

from __future__ import annotations

import datetime
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.manifest import DataFileContent, ManifestFile

from airflow_lakeformat.core.errors import CommitConflictError
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_run as run
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.write import manifest_cache as cache_module
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, write_parquet
from tests.iceberg.scenarios import create_table, rows

DAY = datetime.date(2024, 1, 1)
OPTIONS = {"min-input-files": "2", "remove-dangling-deletes": "true"}


def _table_with_a_delete(tmp_path: Path):
    table = create_table("hadoop", 2, tmp_path)
    for start in (0, 3, 6):
        write.append(table, rows([start, start + 1, start + 2], "a", DAY))
    first = sorted(f.path for f in live_files(table, table.snapshot(ref="main")))[0]
    pos = write_parquet(
        tmp_path / "landing" / "pos.parquet",
        pa.table({"file_path": [first], "pos": pa.array([0], pa.int64())}),
    )
    commit_delete_files(
        table, [data_file(table.table, pos, ("a",), content=DataFileContent.POSITION_DELETES)]
    )
    return table


def _count_decodes(monkeypatch: pytest.MonkeyPatch) -> Counter:
    counts: Counter = Counter()
    decode, read_entries = cache_module.decode_manifests, cache_module.read_entries

    def counting_decode(table, manifests, *args, **kwargs):
        counts.update(("live", m.manifest_path) for m in manifests)
        return decode(table, manifests, *args, **kwargs)

    def counting_entries(table, manifests, *args, **kwargs):
        counts.update(("entries", m.manifest_path) for m in manifests)
        return read_entries(table, manifests, *args, **kwargs)

    def pyiceberg_reader(self, *args, **kwargs):
        counts.update([("pyiceberg", self.manifest_path)])
        return fetch(self, *args, **kwargs)

    fetch = ManifestFile.fetch_manifest_entry
    monkeypatch.setattr(cache_module, "decode_manifests", counting_decode)
    monkeypatch.setattr(cache_module, "read_entries", counting_entries)
    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", pyiceberg_reader)
    return counts


def test_a_compaction_decodes_each_manifest_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table_with_a_delete(tmp_path)
    before = sorted(r["id"] for r in table.table.scan().to_arrow().to_pylist())
    counts = _count_decodes(monkeypatch)
    result = run.compact_data(table, OPTIONS)
    assert result.plan.groups and not result.conflicts
    assert counts, "the compaction read no manifest through the cache"
    assert {kind for kind, _ in counts} <= {"live", "entries"}  # never pyiceberg's slow reader
    assert max(counts.values()) == 1, counts
    table.refresh()
    assert len(before) == 8
    assert sorted(r["id"] for r in table.table.scan().to_arrow().to_pylist()) == before


def test_the_cache_reads_manifests_committed_after_it_was_filled(tmp_path: Path) -> None:
    table = _table_with_a_delete(tmp_path)
    cache = cache_module.ManifestCache()
    before = cache.live_files(table, table.snapshot(ref="main"))
    decoded = cache.decoded["live"]
    write.append(table, rows([9], "a", DAY))
    head = table.refresh().snapshot(ref="main")
    after = cache.live_files(table, head)
    assert {f.path for f in after} == {f.path for f in live_files(table, head)}
    assert len(after) == len(before) + 1
    assert cache.decoded["live"] == decoded + 1  # only the new manifest


def test_a_delete_committed_during_the_rewrite_still_fails_the_commit(tmp_path: Path) -> None:
    table = _table_with_a_delete(tmp_path)
    inputs = sorted(f.path for f in live_files(table, table.snapshot(ref="main")) if f.content == 0)

    def rewriter(t, groups, files):
        pos = write_parquet(
            tmp_path / "landing" / "late.parquet",
            pa.table({"file_path": [inputs[-1]], "pos": pa.array([0], pa.int64())}),
        )
        commit_delete_files(t, [data_file(t.table, pos, ("a",), content=DataFileContent.POSITION_DELETES)])
        yield from run.rewrite_in_process(t, groups, files)

    with pytest.raises(CommitConflictError, match="delete committed since the start"):
        run.compact_data(table, OPTIONS, rewriter=rewriter)
    table.refresh()
    assert sorted(f.path for f in live_files(table, table.snapshot(ref="main")) if f.content == 0) == inputs
    assert len(table.table.scan().to_arrow()) == 9 - 2  # both deletes still apply


def test_whole_entries_past_the_budget_are_streamed_not_kept(tmp_path: Path) -> None:
    table = _table_with_a_delete(tmp_path)
    head = table.snapshot(ref="main")
    manifests = cache_module.read_manifests(table, head)
    cache = cache_module.ManifestCache(max_entries=1)
    first = [
        (m.manifest_path, [e.data_file.file_path for e in es])
        for m, es in cache.entries(table, manifests, "t")
    ]
    again = [
        (m.manifest_path, [e.data_file.file_path for e in es])
        for m, es in cache.entries(table, manifests, "t")
    ]
    assert first == again and len(first) == len(manifests) == 4
    assert sum(len(files) for _, files in first) == 4  # three data files and the delete file
    assert cache.decoded["entries"] == 4 + 3  # one single-entry manifest kept, the others decoded again
