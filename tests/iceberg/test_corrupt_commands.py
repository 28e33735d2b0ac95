"""Every command on a damaged Iceberg table (Hadoop layout), in-process: a typed error or a run that never
needed the file.

Iceberg metadata records absolute paths, so the table is built once per module at one location and restored
there (removed, copied back) before each case. Where the command reads the damaged file it must exit 4 with one
stderr line naming the file, and leave every file on disk as it was (path -> size and sha256). The commands in
``NOT_READ`` never read the damaged file, as in Java Iceberg (a fast append carries the head's manifests
without reading them, expiry reads manifests only to find the files of manifests it removes); they run, and
must leave the damaged file and every data file untouched.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Transaction

from airflow_lakeformat import cli
from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.metadata.avro_guard import CheckedFileIO, checked_io
from airflow_lakeformat.core.iceberg.metadata.live_files import PyIcebergDecoder
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.write import manifest_writer, write
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry
from tests.iceberg.helpers import local_path
from tests.iceberg.scenarios import create_table, rows

OLD = time.time() - 10 * 86400  # older than every orphan cutoff
DAY = datetime.date(2024, 1, 1)
Digest = dict[str, tuple[int, str]]


def digest(root: Path) -> Digest:
    """Every file under ``root``: relative path -> (size, sha256)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``t``: three appends, an old orphan data file and an unregistered Parquet file for ``commit --add``;
    ``pristine`` is its copy; ``source.parquet`` is for ``write``."""
    top = tmp_path_factory.mktemp("corrupt-iceberg")
    table = create_table("hadoop", 2, top)
    for i in range(3):
        write.append(table, rows([i, i + 10], "a", DAY))
    data = top / "t" / "data"
    pq.write_table(rows([98], "a", DAY), data / "orphan.parquet")
    os.utime(data / "orphan.parquet", (OLD, OLD))
    pq.write_table(rows([99], "a", DAY), data / "extra.parquet")
    pq.write_table(rows([7], "a", DAY), top / "source.parquet")
    shutil.copytree(top / "t", top / "pristine")
    return top


def _truncate(path: Path, cut: int) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])
    return path


def truncated_metadata(root: Path) -> Path:
    version = int((root / "metadata" / "version-hint.text").read_text())
    return _truncate(root / "metadata" / f"v{version}.metadata.json", 100)


def _head_list(root: Path) -> Path:
    table = open_path_table(str(root))
    return Path(local_path(table.metadata.current_snapshot().manifest_list))


def _head_manifest(root: Path) -> Path:
    """The manifest the current snapshot added (the others are older snapshots' too)."""
    table = open_path_table(str(root))
    head = table.metadata.current_snapshot()
    added = [m for m in read_manifests(table, head) if m.added_snapshot_id == head.snapshot_id]
    return Path(local_path(added[0].manifest_path))


def truncated_manifest_list(root: Path) -> Path:
    return _truncate(_head_list(root), 30)


def truncated_manifest(root: Path) -> Path:
    return _truncate(_head_manifest(root), 40)


def manifest_cut_at_block_boundary(root: Path) -> Path:
    """Cut right after the header (its sync marker, which also ends every block): a valid, empty Avro
    file (Avro has no end marker), so only the manifest list's ``manifest_length`` reveals the lost rows."""
    path = _head_manifest(root)
    data = path.read_bytes()
    path.write_bytes(data[: data.index(data[-16:]) + 16])
    return path


def missing_manifest(root: Path) -> Path:
    path = _head_manifest(root)
    path.unlink()
    return path


CORRUPTIONS: dict[str, Callable[[Path], Path]] = {
    f.__name__.replace("_", "-"): f
    for f in (
        truncated_metadata,
        truncated_manifest_list,
        truncated_manifest,
        manifest_cut_at_block_boundary,
        missing_manifest,
    )
}

EXPIRE_ALL = ["--retain-last", "1", "--older-than", "0 ms"]
COMMANDS: dict[str, list[str]] = {
    "snapshots": ["snapshots"],
    "files": ["files"],
    "manifests": ["manifests"],
    "inspect": ["inspect"],
    "write": ["write", "--from", "{top}/source.parquet"],
    "commit": ["commit", "--add", "{top}/t/data/extra.parquet"],
    "compact-full": ["compact-manifests", "--full"],
    "compact-minor": ["compact-manifests", "--minor"],
    "compact-dry-run": ["compact-manifests", "--dry-run"],
    "expire": ["expire", "--apply"],
    "expire-dry-run": ["expire", "--dry-run"],
    "expire-all": ["expire", *EXPIRE_ALL, "--apply"],
    "expire-all-dry-run": ["expire", *EXPIRE_ALL, "--dry-run"],
    "remove-orphans": ["remove-orphans", "--apply"],
    "remove-orphans-dry-run": ["remove-orphans", "--dry-run"],
}
READ_ONLY = {"snapshots", "files", "manifests", "inspect", "compact-dry-run", "expire-dry-run",
             "expire-all-dry-run", "remove-orphans-dry-run"}  # fmt: skip
_NO_MANIFEST = {
    "snapshots",  # the table metadata's snapshot records
    "manifests",  # the manifest list's rows
    "write",  # a fast append carries the head's manifests without reading them
    "compact-minor",  # nothing to merge: the policy reads only the manifests it merges
    "expire",  # nothing to expire (5 days): manifest lists only
    "expire-dry-run",
    "expire-all",  # the damaged manifest stays reachable: no manifest is removed, so none is read
    "expire-all-dry-run",
}
# (corruption -> commands that never read the damaged file): they must run and leave it alone.
NOT_READ: dict[str, set[str]] = {
    "truncated-manifest-list": {"snapshots"},
    "truncated-manifest": _NO_MANIFEST,
    "manifest-cut-at-block-boundary": _NO_MANIFEST,
    "missing-manifest": _NO_MANIFEST,
}
HINT = "metadata/version-hint.text"


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_damaged_table(
    workspace: Path, capsys: pytest.CaptureFixture[str], corruption: str, command: str
) -> None:
    root = workspace / "t"
    shutil.rmtree(root)
    shutil.copytree(workspace / "pristine", root)
    damaged = CORRUPTIONS[corruption](root)
    before = digest(root)
    argv = [part.format(top=workspace) for part in COMMANDS[command]]

    status = cli.main([argv[0], str(root), *argv[1:], "--json"])

    out, err = capsys.readouterr()
    after = digest(root)
    if command in NOT_READ.get(corruption, ()):
        assert status == 0, err
        assert_untouched(before, after, damaged.relative_to(root).as_posix(), command)
        return
    assert status == cli.EXIT_CORRUPT, err
    assert json.loads(out)["error"]["exitCode"] == cli.EXIT_CORRUPT, out  # --json: the error document
    assert err.startswith("lakeformat: error: ") and err.count("\n") == 1, err
    assert str(damaged) in err, err
    assert after == before


def assert_untouched(before: Digest, after: Digest, damaged: str, command: str) -> None:
    """A run that never read the damaged file: it is as it was, and so is every existing file but the version
    hint (and, for a real expiry, the expired snapshots' manifest lists)."""
    assert after.get(damaged) == before.get(damaged)
    if command in READ_ONLY:
        assert after == before
        return
    changed = {path for path, value in before.items() if after.get(path) != value}
    if command == "expire-all":
        changed = {path for path in changed if not path.startswith("metadata/snap-")}
    assert changed <= {HINT}, changed


def test_an_error_no_unreadable_file_explains_propagates_unchanged(workspace: Path) -> None:
    root = workspace / "t"
    shutil.rmtree(root)
    shutil.copytree(workspace / "pristine", root)
    table = open_path_table(str(root))

    def stage(_: Transaction) -> None:
        raise ValueError("not about metadata")

    with pytest.raises(ValueError) as caught:
        commit_with_retry(table, stage)
    assert type(caught.value) is ValueError and str(caught.value) == "not about metadata"
    assert digest(root) == digest(workspace / "pristine")


def _block_ends(data: bytes) -> set[int]:
    """Where a cut leaves a whole, shorter container: right after a sync marker."""
    sync, ends, start = data[-16:], set(), 0
    while (found := data.find(sync, start)) >= 0:
        ends.add(found + 16)
        start = found + 1
    return ends


def test_every_truncation_is_refused_before_pyiceberg_decodes(workspace: Path) -> None:
    # pyiceberg 0.12's decoder reads past the buffer of a truncated file (avro_guard): SystemError,
    # MemoryError or a crash for some lengths, depending on the bytes. A cut right after a sync marker
    # leaves a whole container with fewer blocks, which framing cannot tell from a shorter file.
    root = workspace / "t"
    shutil.rmtree(root)
    shutil.copytree(workspace / "pristine", root)
    table = open_path_table(str(root))
    head = table.metadata.current_snapshot()
    assert head is not None
    manifest = read_manifests(table, head)[0]
    data = Path(local_path(manifest.manifest_path)).read_bytes()
    for n in sorted(set(range(len(data))) - _block_ends(data)):
        for decode in (manifest_writer.decode_entries, lambda m, d: PyIcebergDecoder().decode(table, m, d)):
            with pytest.raises(CorruptMetadataError):
                decode(manifest, data[:n])
    list_path = Path(local_path(head.manifest_list))
    whole = list_path.read_bytes()
    for n in sorted(set(range(len(whole))) - _block_ends(whole)):
        list_path.write_bytes(whole[:n])
        with pytest.raises(CorruptMetadataError):
            read_manifests(table, head)
        with checked_io(table), pytest.raises(CorruptMetadataError):  # what pyiceberg reads in a commit
            table.table.io.new_input(head.manifest_list).open()
    list_path.write_bytes(whole)
    with checked_io(table):
        assert table.table.io.new_input(head.manifest_list).open().read() == whole
    assert not isinstance(table.table.io, CheckedFileIO)  # put back
