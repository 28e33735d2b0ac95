"""Every command on a damaged Paimon table, in-process: a typed error or a run that never needed the file.

Each case copies one small table (built once per module), damages one metadata file and runs one command.
Where the command reads the damaged file it must exit 4 with one stderr line naming the file, and leave every
file on disk as it was (path -> size and sha256). A few commands never read the damaged file, in Paimon Java
as here (``NOT_READ``: ``files`` or an append read the latest snapshot only, ``manifests`` prints what the
manifest lists say); they run, and must leave the damaged file and every existing data file untouched.

Expiry parses every snapshot file from the earliest to the latest before it plans anything, so a damaged
snapshot stops it even when nothing would expire (issue 23: it used to report "expired no snapshots").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat import cli, open_table
from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.paimon.maintenance.expiry import plan_snapshot_expiry
from airflow_lakeformat.core.paimon.snapshot_manager import SnapshotManager
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.spark.jobs import expire_snapshots as expire_job

OLD = time.time() - 10 * 86400  # older than every orphan cutoff
LATEST = 4
Digest = dict[str, tuple[int, str]]


def digest(root: Path) -> Digest:
    """Every file under ``root``: relative path -> (size, sha256)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in root.rglob("*")
        if p.is_file()
    }


def rows(*values: int) -> pa.Table:
    return pa.table({"dt": ["d0"] * len(values), "v": pa.array(values, pa.int64())})


@pytest.fixture(autouse=True)
def no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unparsable snapshot is re-read after ``retry_delay`` (a reader racing an object store upload):
    the same typed error here, without the wait."""
    monkeypatch.setitem(SnapshotManager.__init__.__kwdefaults__, "retry_delay", 0.0)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``base``: four appends through the CLI, EARLIEST written, an old orphan data file and an
    unregistered Parquet file for ``commit --add``; ``source.parquet`` for ``write``."""
    top = tmp_path_factory.mktemp("corrupt-paimon")
    base = top / "base"
    schema = top / "schema.json"
    schema.write_text('[{"name": "dt", "type": "STRING"}, {"name": "v", "type": "BIGINT"}]')
    assert cli.main(["create-table", str(base), "--schema", str(schema), "--partition-keys", "dt"]) == 0
    for i in range(LATEST):
        pq.write_table(rows(i, i + 10), top / f"batch-{i}.parquet")
        assert cli.main(["write", str(base), "--from", str(top / f"batch-{i}.parquet")]) == 0
    assert cli.main(["expire", str(base), "--apply"]) == 0  # nothing to expire; writes the EARLIEST hint
    bucket = base / "dt=d0" / "bucket-0"
    pq.write_table(rows(98), bucket / "data-orphan-0.parquet")
    os.utime(bucket / "data-orphan-0.parquet", (OLD, OLD))
    pq.write_table(rows(99), bucket / "data-extra-0.parquet")
    pq.write_table(rows(7), top / "source.parquet")
    return top


def _latest(root: Path) -> dict[str, str]:
    return json.loads((root / "snapshot" / f"snapshot-{LATEST}").read_text())


def _truncate(path: Path, keep: Callable[[int], int]) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: keep(len(data))])


def truncated_latest_snapshot(root: Path) -> Path:
    path = root / "snapshot" / f"snapshot-{LATEST}"
    _truncate(path, lambda n: n // 2)
    return path


def garbage_older_snapshot(root: Path) -> Path:
    path = root / "snapshot" / "snapshot-2"
    path.write_bytes(b"\x00garbage")
    return path


def truncated_manifest_list(root: Path) -> Path:
    path = root / "manifest" / _latest(root)["baseManifestList"]
    _truncate(path, lambda n: n - 30)
    return path


def _latest_delta_manifest(root: Path) -> Path:
    table = Table.open(str(root))
    _, delta = table.data_manifests(table.snapshot_manager.snapshot(LATEST))
    return root / "manifest" / delta[-1].file_name


def truncated_manifest(root: Path) -> Path:
    path = _latest_delta_manifest(root)
    _truncate(path, lambda n: n - 40)
    return path


def manifest_cut_at_block_boundary(root: Path) -> Path:
    """Cut right after the header (its sync marker, which also ends every block): a valid, empty Avro
    file (Avro has no end marker), so only the manifest list's ``_FILE_SIZE`` reveals the lost entries."""
    path = _latest_delta_manifest(root)
    data = path.read_bytes()
    _truncate(path, lambda _: data.index(data[-16:]) + 16)
    return path


def missing_manifest(root: Path) -> Path:
    path = _latest_delta_manifest(root)
    path.unlink()
    return path


def corrupt_schema(root: Path) -> Path:
    path = root / "schema" / "schema-0"
    path.write_text('{"id": 0, "fields": [')
    return path


CORRUPTIONS: dict[str, Callable[[Path], Path]] = {
    f.__name__.replace("_", "-"): f
    for f in (
        truncated_latest_snapshot,
        garbage_older_snapshot,
        truncated_manifest_list,
        truncated_manifest,
        manifest_cut_at_block_boundary,
        missing_manifest,
        corrupt_schema,
    )
}

EXPIRE_ALL = ["--retain-min", "1", "--older-than", "0 ms"]
COMMANDS: dict[str, list[str]] = {
    "snapshots": ["snapshots"],
    "files": ["files"],
    "manifests": ["manifests"],
    "inspect": ["inspect"],
    "write": ["write", "--from", "{top}/source.parquet"],
    "commit": ["commit", "--add", "dt=d0/bucket-0/data-extra-0.parquet"],
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
_LATEST_ONLY = {"files", "manifests", "write", "commit", "compact-full", "compact-minor", "compact-dry-run"}
_NO_MANIFEST = {
    "snapshots",  # reads the snapshot files only
    "manifests",  # prints the manifest lists' rows
    "compact-minor",  # nothing to merge: the policy reads only the manifests it merges
    "expire",  # nothing to expire (retain-min 10): no list or manifest is read
    "expire-dry-run",
}
# (corruption -> commands that never read the damaged file): they must run and leave it alone.
NOT_READ: dict[str, set[str]] = {
    "garbage-older-snapshot": _LATEST_ONLY,  # they read the latest snapshot only
    "truncated-manifest-list": {"expire", "expire-dry-run", "snapshots"},  # snapshots: snapshot files only
    "truncated-manifest": _NO_MANIFEST,
    "manifest-cut-at-block-boundary": _NO_MANIFEST,
    "missing-manifest": _NO_MANIFEST,
}
HINTS = {"snapshot/LATEST", "snapshot/EARLIEST"}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_damaged_table(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], corruption: str, command: str
) -> None:
    root = tmp_path / "t"
    shutil.copytree(workspace / "base", root)
    damaged = CORRUPTIONS[corruption](root)
    before = digest(root)
    argv = [part.format(top=workspace) for part in COMMANDS[command]]

    status = cli.main([argv[0], str(root), *argv[1:], "--json"])

    out, err = capsys.readouterr()
    after = digest(root)
    if command in NOT_READ.get(corruption, ()):
        assert status == 0, err
        assert_untouched(before, after, damaged.relative_to(root).as_posix(), read_only=command in READ_ONLY)
        return
    assert status == cli.EXIT_CORRUPT, err
    assert json.loads(out)["error"]["exitCode"] == cli.EXIT_CORRUPT, out  # --json: the error document
    assert err.startswith("lakeformat: error: ") and err.count("\n") == 1, err
    assert str(damaged) in err, err
    assert after == before


def assert_untouched(before: Digest, after: Digest, damaged: str, *, read_only: bool) -> None:
    """A run that never read the damaged file: it is as it was, and so is every existing file but the hints."""
    assert after.get(damaged) == before.get(damaged)
    if read_only:
        assert after == before
        return
    changed = {path for path, value in before.items() if after.get(path) != value}
    assert changed <= HINTS, changed


def test_expire_names_the_truncated_latest_snapshot_through_every_entry_point(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    shutil.copytree(workspace / "base", root)
    damaged = truncated_latest_snapshot(root)
    before = digest(root)
    maintenance = open_table(str(root)).maintenance
    for call in (
        maintenance.plan_expire_snapshots,
        maintenance.expire_snapshots,
        lambda: maintenance.expire_snapshots(dry_run=False),
        lambda: maintenance.expire_snapshots(retain_min=1, older_than=timedelta(0), dry_run=False),
    ):
        with pytest.raises(CorruptMetadataError) as caught:
            call()
        assert caught.value.path == str(damaged) and "not a valid snapshot JSON" in caught.value.problem
    # The Spark job plans on the driver before it starts a session: no JVM for this one.
    assert expire_job.main(["--table", str(root)]) == cli.EXIT_CORRUPT
    err = capsys.readouterr().err
    assert err.startswith("lakeformat-job: error: ") and str(damaged) in err
    assert digest(root) == before


def test_a_snapshot_file_holding_another_id_stops_expiry(workspace: Path, tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(workspace / "base", root)
    shutil.copy(root / "snapshot" / "snapshot-2", root / "snapshot" / "snapshot-3")
    before = digest(root)
    with pytest.raises(CorruptMetadataError, match="file of snapshot 3 holds snapshot id 2"):
        plan_snapshot_expiry(Table.open(str(root)))
    assert digest(root) == before


def test_a_snapshot_removed_by_a_concurrent_expiry_after_listing_is_skipped(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paimon's semantics: a listed snapshot that is gone when read was expired meanwhile, not damaged.
    root = tmp_path / "t"
    shutil.copytree(workspace / "base", root)
    (root / "snapshot" / "snapshot-1").unlink()
    monkeypatch.setattr(SnapshotManager, "list_snapshot_ids", lambda _: [1, 2, 3, 4])  # listed before
    plan = plan_snapshot_expiry(Table.open(str(root)))
    assert plan.expired_ids == [] and plan.latest == LATEST


def test_stale_hints_are_still_only_hints_for_expiry(workspace: Path, tmp_path: Path) -> None:
    # EARLIEST naming a deleted snapshot and LATEST behind the real latest fall back to the listing.
    root = tmp_path / "t"
    shutil.copytree(workspace / "base", root)
    (root / "snapshot" / "snapshot-1").unlink()
    (root / "snapshot" / "EARLIEST").write_text("1")
    (root / "snapshot" / "LATEST").write_text("2")
    plan = plan_snapshot_expiry(Table.open(str(root)), retain_min=1, older_than=None)
    assert (plan.earliest, plan.latest) == (2, LATEST)
