"""The one deletion module: dry run, batching and S3 bulk deletes, guards, retries, ordered deletes."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, FileDeleter
from tests.support.faults import FaultyFileIO, InjectedFault
from tests.support.seaweedfs import SeaweedFSServer


def _files(root: Path, count: int) -> list[DeleteRequest]:
    root.mkdir(parents=True, exist_ok=True)
    requests = []
    for i in range(count):
        path = root / f"f{i:04d}"
        path.write_bytes(b"x" * (i % 7))
        requests.append(DeleteRequest("data-file" if i % 2 else "manifest", str(path), i % 7))
    return requests


def test_dry_run_is_the_default_and_deletes_nothing(tmp_path: Path) -> None:
    io, _ = FileIO.for_uri(str(tmp_path))
    requests = _files(tmp_path / "d", 10)
    report = FileDeleter(io).delete(requests)
    assert report.dry_run and report.total_files == 10
    assert report.bytes["manifest"] == sum(r.size or 0 for r in requests if r.kind == "manifest")
    assert len(list((tmp_path / "d").iterdir())) == 10


def test_deletes_in_batches_with_a_guard_and_counts_missing_files(tmp_path: Path) -> None:
    io, _ = FileIO.for_uri(str(tmp_path))
    requests = _files(tmp_path / "d", 25)
    Path(requests[0].path).unlink()  # already gone
    batches: list[int] = []

    def guard(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        batches.append(len(batch))
        return [r for r in batch if not r.path.endswith("0007")]

    report = FileDeleter(io, dry_run=False, batch_size=10, concurrency=3).delete(requests, before_batch=guard)
    assert batches == [10, 10, 5]
    assert report.skipped_by_guard == 1 and report.already_missing == 1 and report.total_files == 23
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["f0007"]


def test_transient_errors_are_retried_and_persistent_ones_reported(tmp_path: Path) -> None:
    inner, _ = FileIO.for_uri(str(tmp_path))
    requests = _files(tmp_path / "d", 5)
    flaky = FaultyFileIO(inner, fail_at=2)  # the second delete call fails once
    report = FileDeleter(flaky, dry_run=False, backoff_base=0.0, sleep=lambda _: None).delete(requests)
    assert report.total_files == 5 and not report.failed
    assert not any((tmp_path / "d").iterdir())

    stuck = tmp_path / "e" / "stuck"
    stuck.mkdir(parents=True)
    (stuck / "child").write_text("x")  # a non-empty directory cannot be removed as a file
    report = FileDeleter(inner, dry_run=False, max_attempts=3, sleep=lambda _: None).delete(
        [DeleteRequest("data-file", str(stuck))]
    )
    assert [f.path for f in report.failed] == [str(stuck)] and report.total_files == 0


def test_ordered_deletes_stop_at_the_first_failure(tmp_path: Path) -> None:
    inner, _ = FileIO.for_uri(str(tmp_path))
    requests = _files(tmp_path / "d", 6)

    class FailThird(FaultyFileIO):
        def delete_existing(self, path: str) -> bool:
            if path.endswith("f0002"):
                raise InjectedFault("permanently broken")
            return super().delete_existing(path)

    report = FileDeleter(
        FailThird(inner), dry_run=False, max_attempts=2, sleep=lambda _: None
    ).delete_in_order(requests)
    assert report.total_files == 2 and len(report.failed) == 1
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f0002", "f0003", "f0004", "f0005"]


def test_only_empty_directories_are_removed(tmp_path: Path) -> None:
    io, _ = FileIO.for_uri(str(tmp_path))
    (tmp_path / "a" / "bucket-0").mkdir(parents=True)
    (tmp_path / "b" / "bucket-0").mkdir(parents=True)
    (tmp_path / "b" / "bucket-0" / "data").write_text("x")
    report = FileDeleter(io, dry_run=False).remove_empty_directories(
        [str(tmp_path / "a" / "bucket-0"), str(tmp_path / "b" / "bucket-0")]
    )
    assert report.files["directory"] == 1
    assert not (tmp_path / "a" / "bucket-0").exists() and (tmp_path / "b" / "bucket-0" / "data").exists()


def test_batch_size_is_bounded_by_the_s3_limit(tmp_path: Path) -> None:
    io, _ = FileIO.for_uri(str(tmp_path))
    with pytest.raises(ValueError, match="between 1 and 1000"):
        FileDeleter(io, batch_size=1001)


@pytest.mark.s3
def test_s3_bulk_deletes_of_up_to_1000_keys(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    fs = seaweedfs.fs()
    bucket = s3_bucket.removeprefix("s3://")
    paths = [f"{bucket}/t/f{i:05d}" for i in range(2300)]
    fs.pipe({p: b"x" for p in paths})
    io, _ = FileIO.for_uri(s3_bucket, seaweedfs.storage_options())
    counting = FaultyFileIO(io)
    keep = f"{bucket}/t/f00042"
    report = FileDeleter(counting, dry_run=False, concurrency=4).delete(
        [DeleteRequest("data-file", p, 1) for p in paths],
        before_batch=lambda batch: [r for r in batch if r.path != keep],
    )
    assert [op for op, _ in counting.calls] == ["delete_objects"] * 3  # 1000 + 1000 + 300 keys
    assert report.total_files == 2299 and report.skipped_by_guard == 1 and not report.failed
    fs.invalidate_cache()
    assert fs.find(f"{bucket}/t") == [keep]
